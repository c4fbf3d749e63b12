//! End to end on loopback, every scenario written once and run on every runtime
//! ([`mcp_tests::runtime::Runtime`]): the server scenarios (spoken to in raw HTTP with a
//! hyper client, a test tool) on the tokio and the smol server; the client scenarios on the
//! tokio and the smol client; the client-and-server scenarios on the four pairs (tokio→tokio,
//! smol→smol, smol client→tokio server, tokio client→smol server). The [`e2e!`] invocation at
//! the end instantiates them. Every await is bounded.
//!
//! The test bodies run on `#[tokio::test]`; the smol adapter spawns its own tasks on smol's
//! global executor and its sockets on smol's reactor, so a smol server or client under test
//! runs on smol whoever awaits it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcp_proto::server::{AuthDecision, ProtectedResourceMetadata, RequestHead, ServerConfig};
use mcp_service::Server;
use mcp_service::client::Client as ServiceClient;
use mcp_tests::runtime::{ConnectError, DriverConfig, Runtime, Security, Serving};
use mcp_tests::users;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(10);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn serve(rt: Runtime, server: Server, config: ServerConfig) -> Serving {
    bounded("bind", rt.serve(server, config))
        .await
        .expect("serve")
}

async fn start(rt: Runtime, config: ServerConfig) -> Serving {
    serve(rt, users::server(), config).await
}

/// A request on a fresh connection.
struct Req {
    method: Method,
    host: String,
    session: Option<String>,
    origin: Option<String>,
    bearer: Option<String>,
    accept: &'static str,
    body: Bytes,
    /// Sent in 1 KiB chunks without a `Content-Length` (chunked on HTTP/1.1).
    chunked: bool,
}

impl Req {
    fn post(addr: SocketAddr, body: Value) -> Req {
        Req {
            method: Method::POST,
            host: addr.to_string(),
            session: None,
            origin: None,
            bearer: None,
            accept: "application/json, text/event-stream",
            body: Bytes::from(body.to_string()),
            chunked: false,
        }
    }

    fn get(addr: SocketAddr, session: &str) -> Req {
        Req {
            method: Method::GET,
            host: addr.to_string(),
            session: Some(session.to_owned()),
            origin: None,
            bearer: None,
            accept: "text/event-stream",
            body: Bytes::new(),
            chunked: false,
        }
    }

    fn session(mut self, id: &str) -> Req {
        self.session = Some(id.to_owned());
        self
    }

    fn bearer(mut self, token: &str) -> Req {
        self.bearer = Some(token.to_owned());
        self
    }

    async fn send(self, addr: SocketAddr) -> http::Response<Incoming> {
        let tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
            .await
            .expect("connect");
        let (mut sender, conn) = bounded(
            "handshake",
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)),
        )
        .await
        .expect("handshake");
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(self.method)
            .uri("/mcp")
            .header(header::HOST, self.host)
            .header(header::ACCEPT, self.accept)
            .header(header::CONTENT_TYPE, "application/json")
            .header("MCP-Protocol-Version", "2025-06-18");
        if let Some(id) = self.session {
            req = req.header("Mcp-Session-Id", id);
        }
        if let Some(origin) = self.origin {
            req = req.header(header::ORIGIN, origin);
        }
        if let Some(token) = self.bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = if self.chunked {
            let (tx, rx) = futures_channel::mpsc::unbounded();
            for chunk in self.body.chunks(1024) {
                let frame = hyper::body::Frame::data(Bytes::copy_from_slice(chunk));
                let _ = tx.unbounded_send(Ok::<_, std::convert::Infallible>(frame));
            }
            Either::Right(http_body_util::StreamBody::new(rx))
        } else {
            Either::Left(Full::new(self.body))
        };
        let req = req.body(body).expect("request");
        bounded("response head", sender.send_request(req))
            .await
            .expect("response")
    }
}

async fn body_json(resp: http::Response<Incoming>) -> Value {
    let bytes = bounded("body", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}})
}

fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}})
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

/// Initializes a session; returns its id.
async fn open_session(addr: SocketAddr) -> String {
    open_session_with_result(addr).await.0
}

/// Initializes a session; returns its id and the `initialize` response.
async fn open_session_with_result(addr: SocketAddr) -> (String, Value) {
    let resp = Req::post(addr, initialize()).send(addr).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let id = resp
        .headers()
        .get("mcp-session-id")
        .expect("Mcp-Session-Id")
        .to_str()
        .expect("ascii")
        .to_owned();
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let init = body_json(resp).await;
    assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
    let resp = Req::post(
        addr,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .session(&id)
    .send(addr)
    .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    (id, init)
}

// ---------------------------------------------------------------------------------------
// Server scenarios: one server runtime, raw HTTP.
// ---------------------------------------------------------------------------------------

/// S-POST-1, S-SESS-2, S-GET-1, S-SESS-9: initialize, calls, a GET stream, DELETE, then 404.
async fn users_lifecycle_over_loopback(rt: Runtime) {
    let serving = start(rt, ServerConfig::default()).await;
    let addr = serving.local_addr();
    assert_eq!(serving.url(), format!("http://{addr}/mcp"));
    let (id, init) = open_session_with_result(addr).await;
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        "StreamableHTTP API Server"
    );

    let resp = Req::post(
        addr,
        call(
            2,
            "create_user",
            json!({"name": "Ann", "email": "ann@x.io", "age": 30}),
        ),
    )
    .session(&id)
    .send(addr)
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let created = body_json(resp).await;
    assert_eq!(created["id"], 2);
    assert_eq!(created["result"]["structuredContent"]["id"], "user_1");

    let resp = Req::post(addr, call(3, "get_user", json!({"user_id": "user_1"})))
        .session(&id)
        .send(addr)
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let got = body_json(resp).await;
    assert_eq!(got["result"]["structuredContent"]["name"], "Ann");
    assert_eq!(got["result"]["structuredContent"]["email"], "ann@x.io");

    // The GET stream opens as SSE (and stays open: only the head is awaited).
    let stream = Req::get(addr, &id).send(addr).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(
        stream
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.as_bytes()),
        Some(&b"text/event-stream"[..])
    );

    let mut delete = Req::post(addr, Value::Null).session(&id);
    delete.method = Method::DELETE;
    delete.body = Bytes::new();
    assert_eq!(delete.send(addr).await.status(), StatusCode::OK);

    let resp = Req::post(
        addr,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
    )
    .session(&id)
    .send(addr)
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    drop(stream);
    bounded("shutdown", serving.shutdown()).await;
}

/// S-SEC-5: a foreign `Host` on a loopback bind gets 403.
async fn a_foreign_host_is_refused(rt: Runtime) {
    let serving = start(rt, ServerConfig::default()).await;
    let addr = serving.local_addr();
    let mut req = Req::post(addr, initialize());
    req.host = "evil.example".to_owned();
    assert_eq!(req.send(addr).await.status(), StatusCode::FORBIDDEN);
    bounded("shutdown", serving.shutdown()).await;
}

/// A body over `max_body_bytes` gets 413 (the request body streams into the router).
async fn an_oversized_body_is_refused(rt: Runtime) {
    let serving = start(rt, ServerConfig::default().with_max_body_bytes(1024)).await;
    let addr = serving.local_addr();
    let mut req = Req::post(addr, Value::Null);
    req.body = Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(16 * 1024)
    ));
    assert_eq!(req.send(addr).await.status(), StatusCode::PAYLOAD_TOO_LARGE);
    bounded("shutdown", serving.shutdown()).await;
}

/// Graceful shutdown from another task ends an open SSE stream rather than hang.
async fn shutdown_ends_open_streams(rt: Runtime) {
    let serving = start(rt, ServerConfig::default()).await;
    let addr = serving.local_addr();
    let id = open_session(addr).await;
    let stream = Req::get(addr, &id).send(addr).await;
    assert_eq!(stream.status(), StatusCode::OK);
    // Started from elsewhere (a signal handler, another task).
    let handle = serving.handle().clone();
    tokio::spawn(async move { handle.shutdown() });
    bounded("shutdown", serving.wait()).await;
    // The stream's body ends (or the connection closes) rather than hang.
    let _ = bounded("stream end", stream.into_body().collect()).await;
}

/// S-SSE-16: the driver sleeps until the router's deadline, and each heartbeat comment is
/// written as its own frame on an idle GET stream.
async fn heartbeats_flow_on_an_idle_get_stream(rt: Runtime) {
    let serving = start(
        rt,
        ServerConfig::default().with_heartbeat_interval(Some(Duration::from_millis(30))),
    )
    .await;
    let addr = serving.local_addr();
    let id = open_session(addr).await;
    let mut body = Req::get(addr, &id).send(addr).await.into_body();
    let mut comments = 0;
    for _ in 0..20 {
        let frame = bounded("a frame", body.frame())
            .await
            .expect("the stream stays open")
            .expect("frame");
        if frame.data_ref().is_some_and(|d| d.starts_with(b":")) {
            comments += 1;
            if comments == 2 {
                break;
            }
        }
    }
    assert_eq!(comments, 2, "two heartbeats");
    bounded("shutdown", serving.shutdown()).await;
}

struct NotifyOnDrop(std::sync::Arc<tokio::sync::Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// A client that goes away while its request is being handled cancels the handler (the
/// dropped exchange becomes `handle_disconnect`), though no byte of the response was
/// written yet.
async fn a_client_that_leaves_cancels_its_handler(rt: Runtime) {
    use mcp_service::{CallToolResult, Tool};
    use std::sync::Arc;
    use tokio::sync::Notify;

    let started = Arc::new(Notify::new());
    let cancelled = Arc::new(Notify::new());
    let (s, c) = (started.clone(), cancelled.clone());
    let server = Server::new("t", "1").tool(Tool::new("wait"), move |ctx, _| {
        let (s, c) = (s.clone(), c.clone());
        async move {
            // Cancelling drops the handler.
            let _dropped = NotifyOnDrop(c);
            s.notify_one();
            ctx.cancelled().await;
            Ok(CallToolResult::text("cancelled"))
        }
    });
    let serving = serve(rt, server, ServerConfig::default()).await;
    let addr = serving.local_addr();
    let id = open_session(addr).await;

    let tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect");
    let (mut sender, conn) = bounded(
        "handshake",
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)),
    )
    .await
    .expect("handshake");
    let conn = tokio::spawn(conn);
    let req = Request::builder()
        .method(Method::POST)
        .uri("/mcp")
        .header(header::HOST, addr.to_string())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .header("Mcp-Session-Id", &id)
        .body(Full::new(Bytes::from(
            call(7, "wait", json!({})).to_string(),
        )))
        .expect("request");
    let pending = tokio::spawn(async move { sender.send_request(req).await });
    bounded("handler started", started.notified()).await;
    pending.abort();
    conn.abort();
    bounded("handler cancelled", cancelled.notified()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// A GET stream whose client left is noticed without waiting for a write (heartbeats are at
/// their 15 s default here): its session, idle, is then evicted after `session_idle_ttl`,
/// while a session whose stream is still open is kept (the control).
async fn a_dropped_get_stream_is_noticed_before_any_write(rt: Runtime) {
    let ttl = Duration::from_millis(300);
    let serving = start(rt, ServerConfig::default().with_session_idle_ttl(Some(ttl))).await;
    let addr = serving.local_addr();
    let kept = open_session(addr).await;
    let left = open_session(addr).await;
    let kept_stream = Req::get(addr, &kept).send(addr).await;
    assert_eq!(kept_stream.status(), StatusCode::OK);
    let left_stream = Req::get(addr, &left).send(addr).await;
    assert_eq!(left_stream.status(), StatusCode::OK);
    // Dropping the response and its connection task closes the socket.
    drop(left_stream);
    // Well past the TTL, well before the first heartbeat.
    tokio::time::sleep(ttl * 6).await;
    let resp = Req::post(addr, ping(2)).session(&kept).send(addr).await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "the session with a stream is kept"
    );
    let resp = Req::post(addr, ping(3)).session(&left).send(addr).await;
    assert_eq!(
        resp.status(),
        StatusCode::NOT_FOUND,
        "the session whose stream was dropped was evicted"
    );
    drop(kept_stream);
    bounded("shutdown", serving.shutdown()).await;
}

/// A connection whose first request is a GET carries the requests after it: a GET answered
/// with a length (400: no session) and a POST written behind it in the same send
/// (pipelined) are both answered, in order, on the one connection; a GET that asks
/// `Connection: close` is answered with it, and the connection then closes. (On tokio such
/// a first GET is answered outside hyper, and hyper takes the connection on after it.)
async fn requests_after_a_first_get_are_answered_on_its_connection(rt: Runtime) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let serving = start(rt, ServerConfig::default()).await;
    let addr = serving.local_addr();
    let sid = open_session(addr).await;
    let get = |extra: &str| {
        format!(
            "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
             MCP-Protocol-Version: 2025-06-18\r\n{extra}\r\n"
        )
    };
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}"#;
    let post = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nMcp-Session-Id: {sid}\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n{note}",
        note.len()
    );
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect");
    let both = format!("{}{post}", get(""));
    bounded("write", tcp.write_all(both.as_bytes()))
        .await
        .expect("write");
    let mut buf = Vec::new();
    let (status, head, body) = read_response(&mut tcp, &mut buf).await;
    assert_eq!(status, 400, "{head}");
    let refused: Value = serde_json::from_slice(&body).expect("a JSON error");
    assert!(refused["error"]["code"].is_i64(), "{refused}");
    let (status, head, _) = read_response(&mut tcp, &mut buf).await;
    assert_eq!(status, 202, "the POST behind the GET: {head}");
    // And one more on the same connection, after both.
    bounded("write", tcp.write_all(post.as_bytes()))
        .await
        .expect("write");
    let (status, head, _) = read_response(&mut tcp, &mut buf).await;
    assert_eq!(status, 202, "{head}");
    // `Connection: close`: answered with it, then EOF.
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect");
    let closing = get("Connection: close\r\n");
    bounded("write", tcp.write_all(closing.as_bytes()))
        .await
        .expect("write");
    let mut buf = Vec::new();
    let (status, head, _) = read_response(&mut tcp, &mut buf).await;
    assert_eq!(status, 400, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "a `close` request is answered with `close` (RFC 9112 §9.6): {head}"
    );
    let mut rest = Vec::new();
    bounded("EOF", tcp.read_to_end(&mut rest))
        .await
        .expect("EOF");
    assert!(
        rest.is_empty() && buf.is_empty(),
        "nothing after the answer"
    );
    bounded("shutdown", serving.shutdown()).await;
}

/// Reads one response from `tcp` (`buf` keeps what came after it): its status, its head,
/// its body (by its `Content-Length`, or its chunks: whether the driver gave a body whole
/// by the time its head goes out is a race).
async fn read_response(
    tcp: &mut tokio::net::TcpStream,
    buf: &mut Vec<u8>,
) -> (u16, String, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    async fn fill(buf: &mut Vec<u8>, tcp: &mut tokio::net::TcpStream) {
        let mut room = [0u8; 4096];
        let n = bounded("read", tcp.read(&mut room)).await.expect("read");
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&room[..n]);
    }
    async fn line(buf: &mut Vec<u8>, tcp: &mut tokio::net::TcpStream) -> Vec<u8> {
        loop {
            if let Some(at) = buf.windows(2).position(|w| w == b"\r\n") {
                let line = buf[..at].to_vec();
                buf.drain(..at + 2);
                return line;
            }
            fill(buf, tcp).await;
        }
    }
    async fn take(buf: &mut Vec<u8>, tcp: &mut tokio::net::TcpStream, n: usize) -> Vec<u8> {
        while buf.len() < n {
            fill(buf, tcp).await;
        }
        buf.drain(..n).collect()
    }
    let mut head = String::new();
    loop {
        let l = String::from_utf8(line(buf, tcp).await).expect("an ASCII head");
        if l.is_empty() {
            break;
        }
        head.push_str(&l);
        head.push_str("\r\n");
    }
    let status = head[9..12].parse().expect("a status");
    let field = |wanted: &str| {
        head.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case(wanted)
                .then(|| value.trim().to_ascii_lowercase())
        })
    };
    let body = if field("transfer-encoding").as_deref() == Some("chunked") {
        let mut body = Vec::new();
        loop {
            let size = String::from_utf8(line(buf, tcp).await).expect("a chunk size");
            let size = usize::from_str_radix(&size, 16).expect("a hex size");
            body.extend(take(buf, tcp, size).await);
            assert!(line(buf, tcp).await.is_empty(), "CRLF after a chunk");
            if size == 0 {
                break body;
            }
        }
    } else {
        let length = field("content-length").map_or(0, |n| n.parse().expect("a length"));
        take(buf, tcp, length).await
    };
    (status, head, body)
}

/// S-SEC-1/S-SEC-2: a foreign `Origin` is refused with 403 before any session is looked up;
/// a loopback one is fine.
async fn a_foreign_origin_is_refused(rt: Runtime) {
    let serving = start(rt, ServerConfig::default()).await;
    let addr = serving.local_addr();
    let mut req = Req::post(addr, initialize());
    req.origin = Some("http://evil.example".to_owned());
    let resp = req.send(addr).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(resp.headers().get("mcp-session-id").is_none());
    let refused = body_json(resp).await;
    assert!(refused["error"]["code"].is_i64(), "{refused}");
    let mut req = Req::post(addr, initialize());
    req.origin = Some(format!("http://{addr}"));
    assert_eq!(req.send(addr).await.status(), StatusCode::OK);
    bounded("shutdown", serving.shutdown()).await;
}

/// `OPTIONS` on the wire: 204 with `Allow` (no body) from a server as configured by
/// default, and with CORS configured the preflight answer for an allowed origin.
async fn options_is_answered_with_allow(rt: Runtime) {
    let app = "https://app.example.com";
    let options = |addr: SocketAddr, origin: Option<&str>| {
        let mut req = Req::post(addr, json!({}));
        req.method = Method::OPTIONS;
        req.body = Bytes::new();
        req.origin = origin.map(str::to_owned);
        req
    };
    let serving = start(rt, ServerConfig::default()).await;
    let addr = serving.local_addr();
    let resp = options(addr, None).send(addr).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        resp.headers()
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok()),
        Some("GET, POST, DELETE, OPTIONS")
    );
    assert!(resp.headers().get("mcp-session-id").is_none());
    let body = bounded("body", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    assert!(body.is_empty(), "{body:?}");
    bounded("shutdown", serving.shutdown()).await;
    let config =
        ServerConfig::default().with_cors(mcp_proto::server::CorsConfig::allow_origins([app]));
    let serving = start(rt, config).await;
    let addr = serving.local_addr();
    let resp = options(addr, Some(app)).send(addr).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let h = resp.headers();
    assert_eq!(
        h.get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .and_then(|v| v.to_str().ok()),
        Some(app)
    );
    assert!(h.get(header::ACCESS_CONTROL_ALLOW_METHODS).is_some());
    assert!(h.get(header::ALLOW).is_some());
    bounded("shutdown", serving.shutdown()).await;
}

// ---------------------------------------------------------------------------------------
// Client scenarios: one client runtime.
// ---------------------------------------------------------------------------------------

/// A refused connection fails `connect` (no hang) with an error naming the URL and the
/// operating system's reason; a URL neither http nor https is refused at once.
async fn the_client_reports_a_refused_connection(rt: Runtime) {
    // Bind and drop: nothing listens on the port any more.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let url = format!("http://{addr}/mcp");
    let err = bounded("connect", rt.connect(&url))
        .await
        .expect_err("nothing listens");
    let text = err.to_string();
    match &err {
        ConnectError::Connect { url: named, error } => {
            assert_eq!(named, &url);
            assert_eq!(
                error.kind(),
                std::io::ErrorKind::ConnectionRefused,
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        text.starts_with(&format!("cannot connect to {url}: ")),
        "{text}"
    );
    assert!(text.contains("os error"), "{text}");
    assert!(std::error::Error::source(&err).is_some(), "{text}");
    assert!(matches!(
        rt.start(
            "ftp://x/mcp",
            mcp_service::client::Client::builder("t", "1"),
            Default::default()
        ),
        Err(ConnectError::InvalidUrl(_))
    ));
}

// ---------------------------------------------------------------------------------------
// Client-and-server scenarios: a client runtime against a server runtime.
// ---------------------------------------------------------------------------------------

/// The typed client against the users server: tools, calls, a tool error, close (DELETE).
async fn the_client_drives_the_users_server(server: Runtime, client_rt: Runtime) {
    drive_the_users_server(server, client_rt, &Security::Plain).await;
}

/// [`the_client_drives_the_users_server`] over HTTPS (HTTP/2 between the tokio client and
/// server, HTTP/1.1 when either is smol).
async fn the_client_drives_the_users_server_over_https(server: Runtime, client_rt: Runtime) {
    drive_the_users_server(server, client_rt, &Security::tls()).await;
}

async fn drive_the_users_server(server: Runtime, client_rt: Runtime, security: &Security) {
    let serving = bounded(
        "bind",
        server.serve_over(security, users::server(), ServerConfig::default()),
    )
    .await
    .expect("serve");
    let scheme = if matches!(security, Security::Plain) {
        "http"
    } else {
        "https"
    };
    assert!(
        serving.url().starts_with(&format!("{scheme}://")),
        "{}",
        serving.url()
    );
    let client = bounded(
        "connect",
        client_rt.connect_over(
            security,
            serving.url(),
            ServiceClient::builder("e2e", "1"),
            mcp_proto::client::ClientConfig::new(),
        ),
    )
    .await
    .expect("connect");
    assert_eq!(
        client.server_info().map(|i| i.server_info.name),
        Some("StreamableHTTP API Server".to_owned())
    );
    let tools = bounded("tools/list", client.list_tools())
        .await
        .expect("tools");
    let mut names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["create_user", "get_user", "search_users"]);
    let created = bounded(
        "create_user",
        client.call_tool(
            "create_user",
            json!({"name": "Bo", "email": "bo@y.io", "age": 4}),
        ),
    )
    .await
    .expect("create_user");
    assert_eq!(
        created.structured_content.expect("structured")["id"],
        "user_1"
    );
    let got = bounded(
        "get_user",
        client.call_tool("get_user", json!({"user_id": "user_1"})),
    )
    .await
    .expect("get_user");
    assert_eq!(got.structured_content.expect("structured")["name"], "Bo");
    let missing = bounded(
        "get_user",
        client.call_tool("get_user", json!({"user_id": "user_9"})),
    )
    .await
    .expect("a tool error is a result");
    assert_eq!(missing.is_error, Some(true));
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// The everything server over real sockets: SSE responses carrying logs, progress and
/// server→client requests (sampling, elicitation), and a stream the server closes for
/// polling that the client resumes (S-POST-22, S-RES-*).
async fn everything_over_loopback(server: Runtime, client_rt: Runtime) {
    everything_over(server, client_rt, &Security::Plain).await;
}

/// [`everything_over_loopback`] over HTTPS: SSE responses, the GET stream (continuous
/// listening) and resumption through TLS, on HTTP/2 between the tokio client and server.
async fn everything_over_https(server: Runtime, client_rt: Runtime) {
    everything_over(server, client_rt, &Security::tls()).await;
}

async fn everything_over(server: Runtime, client_rt: Runtime, security: &Security) {
    use mcp_service::client::{RequestOptions, ServerNotification};
    use mcp_service::schema::LoggingLevel;
    use mcp_tests::everything;
    use mcp_tests::harness::{SAMPLING_ANSWER, conformance_client};
    use std::sync::{Arc, Mutex};

    let config = ServerConfig::default().with_retry_interval(Duration::from_millis(50));
    let serving = bounded(
        "bind",
        server.serve_over(security, everything::server(), config),
    )
    .await
    .expect("serve");
    let client = bounded(
        "connect",
        client_rt.connect_over(
            security,
            serving.url(),
            conformance_client(),
            mcp_proto::client::ClientConfig::new().with_continuous_listening(true),
        ),
    )
    .await
    .expect("connect");
    bounded("logging/setLevel", client.set_level(LoggingLevel::Debug))
        .await
        .expect("setLevel");

    let mut notes = client.notifications();
    bounded(
        "logging tool",
        client.call_tool("test_tool_with_logging", json!({})),
    )
    .await
    .expect("logging tool");
    let logs: Vec<String> = notes
        .drain()
        .into_iter()
        .filter_map(|n| match n {
            ServerNotification::Log(l) => l.data.as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(
        logs,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );

    let progress = Arc::new(Mutex::new(Vec::new()));
    let p2 = progress.clone();
    let options = RequestOptions::new().on_progress(move |p| {
        p2.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(p.progress.as_u64())
    });
    bounded(
        "progress tool",
        client.call_tool_with("test_tool_with_progress", json!({}), options),
    )
    .await
    .expect("progress tool");
    assert_eq!(
        *progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        [Some(0), Some(50), Some(100)]
    );

    let sampled = bounded(
        "sampling",
        client.call_tool("test_sampling", json!({"prompt": "hi"})),
    )
    .await
    .expect("sampling");
    assert_eq!(
        sampled.first_text(),
        Some(format!("LLM response: {SAMPLING_ANSWER}").as_str())
    );
    let elicited = bounded(
        "elicitation",
        client.call_tool("test_elicitation", json!({"message": "who?"})),
    )
    .await
    .expect("elicitation");
    assert!(
        elicited
            .first_text()
            .is_some_and(|t| t.starts_with("User response: action=accept")),
        "{elicited:?}"
    );
    let resumed = bounded(
        "reconnection",
        client.call_tool("test_reconnection", json!({})),
    )
    .await
    .expect("reconnection");
    assert_eq!(resumed.first_text(), Some("Reconnection test completed"));

    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// Many calls at once through one client and one server driver (on the smol client, each
/// in flight on a connection of its own).
async fn concurrent_calls_all_complete(server: Runtime, client_rt: Runtime) {
    let serving = start(server, ServerConfig::default()).await;
    let client = bounded("connect", client_rt.connect(serving.url()))
        .await
        .expect("connect");
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..64 {
        let c = client.client().clone();
        calls.spawn(async move {
            c.call_tool(
                "create_user",
                json!({"name": format!("n{i}"), "email": format!("u{i}@x.io"), "age": i}),
            )
            .await
        });
    }
    let mut ids = Vec::new();
    while let Some(done) = bounded("calls", calls.join_next()).await {
        let result = done.expect("task").expect("call");
        ids.push(result.structured_content.expect("structured")["id"].clone());
    }
    assert_eq!(ids.len(), 64);
    ids.sort_by_key(|v| v.to_string());
    ids.dedup();
    assert_eq!(ids.len(), 64, "every call created its own user");
    let found = bounded(
        "search",
        client.call_tool("search_users", json!({"query": "@x.io", "limit": 100})),
    )
    .await
    .expect("search");
    assert_eq!(found.structured_content.expect("structured")["total"], 64);
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// A handler that panics must not leave its request hanging: the runtime drops the panicking
/// task, and the binding's drop guard answers the request with -32603; the session keeps
/// working.
async fn a_panicking_handler_gets_an_internal_error_not_a_hang(
    server: Runtime,
    client_rt: Runtime,
) {
    use mcp_service::client::RequestError;
    use mcp_service::schema::Tool;

    let tools = users::server().tool(Tool::new("explode"), |_ctx, _args| async {
        panic!("this handler panics on purpose");
    });
    let serving = serve(server, tools, ServerConfig::default()).await;
    let client = bounded("connect", client_rt.connect(serving.url()))
        .await
        .expect("connect");
    let err = bounded("explode", client.call_tool("explode", json!({})))
        .await
        .expect_err("a panicking handler is an error");
    match err {
        RequestError::Rpc { code, .. } => {
            assert_eq!(code, mcp_proto::jsonrpc::error_codes::INTERNAL_ERROR)
        }
        other => panic!("expected a JSON-RPC internal error, got {other:?}"),
    }
    let got = bounded(
        "get_user after the panic",
        client.call_tool("get_user", json!({"user_id": "user_9"})),
    )
    .await
    .expect("the session still answers");
    assert_eq!(got.is_error, Some(true));
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// Stateless mode end to end: no session id is issued, GET and DELETE are 405, and the
/// client works against it (every request stands alone).
async fn stateless_mode_end_to_end(server: Runtime, client_rt: Runtime) {
    let serving = start(server, ServerConfig::default().with_stateless(true)).await;
    let addr = serving.local_addr();
    let resp = Req::post(addr, initialize()).send(addr).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers().get("mcp-session-id").is_none());
    let init = body_json(resp).await;
    assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
    for method in [Method::GET, Method::DELETE] {
        let mut req = Req::post(addr, Value::Null);
        req.method = method.clone();
        req.accept = "text/event-stream";
        req.body = Bytes::new();
        assert_eq!(
            req.send(addr).await.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method}"
        );
    }
    let client = bounded("connect", client_rt.connect(serving.url()))
        .await
        .expect("connect");
    let tools = bounded("tools/list", client.list_tools())
        .await
        .expect("tools");
    assert_eq!(tools.len(), 3);
    let missing = bounded(
        "get_user",
        client.call_tool("get_user", json!({"user_id": "user_9"})),
    )
    .await
    .expect("a tool error is a result");
    assert_eq!(missing.is_error, Some(true));
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// JSON response mode end to end: a call is answered with one `application/json` body, and
/// the client works against it.
async fn json_response_mode_end_to_end(server: Runtime, client_rt: Runtime) {
    use mcp_proto::server::ResponseMode;

    let serving = start(
        server,
        ServerConfig::default().with_response_mode(ResponseMode::Json),
    )
    .await;
    let addr = serving.local_addr();
    let id = open_session(addr).await;
    let resp = Req::post(
        addr,
        call(
            2,
            "create_user",
            json!({"name": "Jo", "email": "jo@x.io", "age": 9}),
        ),
    )
    .session(&id)
    .send(addr)
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.as_bytes()),
        Some(&b"application/json"[..])
    );
    let created = body_json(resp).await;
    assert_eq!(created["result"]["structuredContent"]["id"], "user_1");
    let client = bounded("connect", client_rt.connect(serving.url()))
        .await
        .expect("connect");
    let got = bounded(
        "get_user",
        client.call_tool("get_user", json!({"user_id": "user_1"})),
    )
    .await
    .expect("get_user");
    assert_eq!(got.structured_content.expect("structured")["name"], "Jo");
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// S-SESS-7/S-SESS-8: the server restarts on the same port and forgets every session; the
/// client's next call gets 404, re-initializes on its own and succeeds.
async fn a_server_restart_is_repaired_by_reinitializing(server: Runtime, client_rt: Runtime) {
    use std::sync::{Arc, Mutex};

    let serving = start(server, ServerConfig::default()).await;
    let addr = serving.local_addr();
    // Every request the client sends: its JSON-RPC method and the session id it carries.
    type Sent = Vec<(String, Option<String>)>;
    let sent: Arc<Mutex<Sent>> = Arc::default();
    let log = sent.clone();
    let config = mcp_proto::client::ClientConfig::new().with_header_fn(move |ctx, _| {
        if let Some(method) = ctx.rpc_method {
            log.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((method.to_owned(), ctx.session_id.map(str::to_owned)));
        }
    });
    let client = bounded(
        "connect",
        client_rt.connect_with(
            serving.url(),
            mcp_service::client::Client::builder("e2e", "1"),
            config,
        ),
    )
    .await
    .expect("connect");
    let created = bounded(
        "create_user",
        client.call_tool(
            "create_user",
            json!({"name": "Old", "email": "old@x.io", "age": 1}),
        ),
    )
    .await
    .expect("create_user");
    assert_eq!(
        created.structured_content.expect("structured")["id"],
        "user_1"
    );
    bounded("shutdown", serving.shutdown()).await;

    // The same port, a fresh server (new store, no sessions).
    let serving = bounded(
        "re-bind",
        server.serve_on(addr, users::server(), ServerConfig::default()),
    )
    .await
    .expect("re-bind the same port");
    // The client's session id is unknown there (404): only a new `initialize` lets a call
    // through.
    //
    // A pooled keep-alive connection to the old server whose close the client has not yet
    // noticed (a loaded machine) fails that one call with a transport reset: the request may
    // have reached the old process, so the core does not re-send a `tools/call` by itself (no
    // silent re-execution); the app sees the failure and may call again, as done here once.
    let mut got = bounded(
        "get_user after the restart",
        client.call_tool("get_user", json!({"user_id": "user_1"})),
    )
    .await;
    let met_old_connection = matches!(&got, Err(mcp_service::client::RequestError::Transport(_)));
    if let Err(mcp_service::client::RequestError::Transport(e)) = &got {
        // The call, or the re-initialization it started, met the old process: a failed
        // re-initialization fails the call (SessionExpired), and the next request starts a
        // new one rather than wait.
        eprintln!("the first call after the restart met the old connection ({e}); once more");
        got = bounded(
            "get_user after the restart, again",
            client.call_tool("get_user", json!({"user_id": "user_1"})),
        )
        .await;
    }
    let got = got.expect("the client re-initializes and the call succeeds");
    // The new server's store is empty: the call reached it.
    assert_eq!(got.is_error, Some(true), "{got:?}");
    // The call went out with the old session (404), then a fresh `initialize` (no session),
    // then the call again with the new session.
    let sent = sent
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let old_id = sent
        .iter()
        .find(|(m, _)| m == "tools/call")
        .and_then(|(_, id)| id.clone())
        .expect("the first call carried the session");
    let calls_with_old = sent
        .iter()
        .filter(|(m, id)| m == "tools/call" && id.as_deref() == Some(old_id.as_str()))
        .count();
    // (More than one after the restart only if a dead pooled connection made the core retry.)
    assert!(
        calls_with_old >= 2,
        "the first call, then the one that met the restart: {sent:?}"
    );
    let inits: Vec<_> = sent.iter().filter(|(m, _)| m == "initialize").collect();
    // The first initialize and the repair (plus, when the repair met the old process's
    // pooled connection, the one that failed there).
    let expected = if met_old_connection { 2..=3 } else { 2..=2 };
    assert!(
        expected.contains(&inits.len()),
        "the first initialize and the repair: {sent:?}"
    );
    assert!(inits.iter().all(|(_, id)| id.is_none()), "{sent:?}");
    let last = sent.last().expect("requests");
    assert_eq!(last.0, "tools/call");
    assert!(
        last.1.as_ref().is_some_and(|id| *id != old_id),
        "the repaired call carries the new session: {sent:?}"
    );
    let created = bounded(
        "create_user after the restart",
        client.call_tool(
            "create_user",
            json!({"name": "New", "email": "new@x.io", "age": 2}),
        ),
    )
    .await
    .expect("create_user");
    assert_eq!(
        created.structured_content.expect("structured")["id"],
        "user_1"
    );
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// A tool for the resumption tests: progress 1 and 2, then `pause` (which breaks the
/// stream), then progress 3 and its result.
fn resumable_server<P, F>(pause: P) -> mcp_service::Server
where
    P: Fn(mcp_service::RequestContext) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    use mcp_service::schema::{CallToolResult, Tool};
    let pause = std::sync::Arc::new(pause);
    mcp_service::Server::new("resume", "1").tool(Tool::new("steps"), move |ctx, _| {
        let pause = pause.clone();
        async move {
            ctx.progress(1, Some(3));
            ctx.progress(2, Some(3));
            pause(ctx.clone()).await;
            ctx.progress(3, Some(3));
            Ok(CallToolResult::text("steps done"))
        }
    })
}

/// Calls `steps` with a progress callback; returns the progress values seen and the result.
async fn call_steps(client: &ServiceClient) -> (Vec<u64>, String) {
    use mcp_service::client::RequestOptions;
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let options = RequestOptions::new().on_progress(move |p| {
        if let Some(v) = p.progress.as_u64() {
            s2.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(v);
        }
    });
    let result = bounded("steps", client.call_tool_with("steps", json!({}), options))
        .await
        .expect("steps");
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    (seen, result.first_text().unwrap_or_default().to_owned())
}

/// S-RES-*: the server closes the POST stream mid-response for polling (SEP-1699); the
/// client resumes with `Last-Event-ID` and gets every progress once and the result once.
async fn a_post_stream_closed_for_polling_resumes_without_loss_or_repeat(
    server_rt: Runtime,
    client_rt: Runtime,
) {
    let server = resumable_server(|ctx| async move {
        ctx.close_stream().expect("the stream can be closed");
        ctx.sleep(Duration::from_millis(20)).await;
    });
    let config = ServerConfig::default().with_retry_interval(Duration::from_millis(50));
    let serving = serve(server_rt, server, config).await;
    let client = bounded("connect", client_rt.connect(serving.url()))
        .await
        .expect("connect");
    let (progress, text) = call_steps(&client).await;
    assert_eq!(progress, [1, 2, 3]);
    assert_eq!(text, "steps done");
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// Reads what is there (cancel-safe: nothing is consumed before `try_read`).
async fn read_some(s: &tokio::net::TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        s.readable().await?;
        match s.try_read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => return other,
        }
    }
}

async fn write_all(s: &tokio::net::TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        s.writable().await?;
        match s.try_write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A TCP proxy in front of `upstream` that cuts the first connection whose response bytes
/// contain `marker` (right after forwarding them) and then notifies `cut`. Returns its
/// address and the number of requests it forwarded that carried `Last-Event-ID`.
async fn cutting_proxy(
    upstream: SocketAddr,
    marker: &'static [u8],
    cut: std::sync::Arc<tokio::sync::Notify>,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let listener = bounded("bind", tokio::net::TcpListener::bind("127.0.0.1:0"))
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let resumes = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let count = resumes.clone();
    tokio::spawn(async move {
        while let Ok((down, _)) = listener.accept().await {
            let (cut, done, count) = (cut.clone(), done.clone(), count.clone());
            tokio::spawn(async move {
                let Ok(up) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut a, mut b) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
                let mut tail: Vec<u8> = Vec::new();
                loop {
                    tokio::select! {
                        n = read_some(&down, &mut a) => match n {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                let head = a[..n].to_ascii_lowercase();
                                let needle = b"\r\nlast-event-id:";
                                if head.windows(needle.len()).any(|w| w == needle) {
                                    count.fetch_add(1, Ordering::SeqCst);
                                }
                                if write_all(&up, &a[..n]).await.is_err() {
                                    return;
                                }
                            }
                        },
                        n = read_some(&up, &mut b) => match n {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if write_all(&down, &b[..n]).await.is_err() {
                                    return;
                                }
                                if done.load(Ordering::SeqCst) {
                                    continue;
                                }
                                tail.extend_from_slice(&b[..n]);
                                if tail.windows(marker.len()).any(|w| w == marker) {
                                    done.store(true, Ordering::SeqCst);
                                    // Dropping both sockets cuts the exchange mid-response.
                                    drop(down);
                                    drop(up);
                                    cut.notify_one();
                                    return;
                                }
                                let keep = tail.len().saturating_sub(marker.len());
                                tail.drain(..keep);
                            }
                        },
                    }
                }
            });
        }
    });
    (addr, resumes)
}

/// S-RES-*: the TCP connection is cut mid-response (after progress 2, before progress 3 and
/// the result exist); the client resumes with `Last-Event-ID` and gets every progress once
/// and the result once.
async fn a_post_stream_cut_mid_response_resumes_without_loss_or_repeat(
    server_rt: Runtime,
    client_rt: Runtime,
) {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use tokio::sync::Notify;

    let cut = Arc::new(Notify::new());
    let waiter = cut.clone();
    let server = resumable_server(move |_ctx| {
        let waiter = waiter.clone();
        async move { waiter.notified().await }
    });
    let config = ServerConfig::default()
        .with_retry_interval(Duration::from_millis(50))
        .with_response_mode(mcp_proto::server::ResponseMode::Sse);
    let serving = serve(server_rt, server, config).await;
    let (proxy, resumes) = cutting_proxy(serving.local_addr(), br#""progress":2"#, cut).await;
    let client = bounded("connect", client_rt.connect(&format!("http://{proxy}/mcp")))
        .await
        .expect("connect");
    // The handler passes progress 2 only once the proxy cut the connection, so progress 3
    // and the result can only arrive on a resumed stream.
    let (progress, text) = call_steps(&client).await;
    assert_eq!(progress, [1, 2, 3]);
    assert_eq!(text, "steps done");
    assert!(
        resumes.load(Ordering::SeqCst) >= 1,
        "the client resumed with Last-Event-ID"
    );
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// Instantiates every scenario: server scenarios per server runtime, client scenarios per
/// client runtime, pair scenarios per (server, client) pair. Each test gets a
/// multi-threaded tokio runtime for its body.
/// The transport's events reach the app (`Client::events`), and `listen_opened` resolves once
/// the GET stream is open with continuous listening; without listening it resolves `false`
/// when the client closes (never `true`).
async fn listen_opened_and_events_reach_the_app(server: Runtime, client_rt: Runtime) {
    use mcp_proto::client::{ClientConfig, ClientEvent};
    let serving = start(server, ServerConfig::default()).await;
    let builder = mcp_service::client::Client::builder("events", "1");
    let config = ClientConfig::new().with_continuous_listening(true);
    let client = bounded(
        "connect",
        client_rt.connect_with(serving.url(), builder, config),
    )
    .await
    .expect("connect");
    let mut events = client.events();
    assert!(bounded("listen_opened", client.listen_opened()).await);
    // Events keep flowing to subscribers: a later call's stream, then close, ends the stream.
    bounded("tools/list", client.list_tools())
        .await
        .expect("tools");
    let c2 = client.client().clone();
    bounded("close", client.close()).await;
    let mut seen = Vec::new();
    while let Some(event) = bounded("events end", events.next()).await {
        seen.push(event);
    }
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, ClientEvent::ListenUnsupported)),
        "{seen:?}"
    );
    assert!(c2.listen_opened().await, "the opening is remembered");

    // Without listening: nothing opens; close resolves the wait with false.
    let builder = mcp_service::client::Client::builder("events", "1");
    let client = bounded(
        "connect",
        client_rt.connect_with(serving.url(), builder, ClientConfig::new()),
    )
    .await
    .expect("connect");
    let c3 = client.client().clone();
    let waiting = tokio::spawn(async move { c3.listen_opened().await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "no listening stream was opened");
    bounded("close", client.close()).await;
    assert!(!bounded("wait ends", waiting).await.expect("join"));
    bounded("shutdown", serving.shutdown()).await;
}

/// An asynchronous authenticator standing in for a key-set fetch: it answers from another
/// thread after a delay (runtime-neutral), counts its calls, and knows the tokens `alice`,
/// `bob`, `narrow` (lacks a scope), `slow` (never answers), `boom` (panics).
fn async_auth(calls: Arc<AtomicUsize>) -> (ServerConfig, DriverConfig) {
    let config = ServerConfig::default().with_protected_resource(ProtectedResourceMetadata::new(
        "http://127.0.0.1/mcp",
        "http://127.0.0.1:1/",
    ));
    let driver = DriverConfig::default()
        .with_authentication_timeout(Duration::from_millis(300))
        .with_authenticator(move |head: &RequestHead<'_>| {
            calls.fetch_add(1, Ordering::SeqCst);
            let token = head
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned);
            let (tx, rx) = futures_channel::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                let decision = match token.as_deref() {
                    Some(who @ ("alice" | "bob")) => AuthDecision::allow(who),
                    Some("narrow") => AuthDecision::InsufficientScope {
                        scope: "mcp:tools".to_owned(),
                        description: None,
                    },
                    Some("slow") => {
                        std::thread::sleep(Duration::from_secs(2));
                        AuthDecision::allow("late")
                    }
                    Some("boom") => return drop(tx),
                    _ => AuthDecision::unauthorized(),
                };
                let _ = tx.send(decision);
            });
            async move {
                match rx.await {
                    Ok(decision) => decision,
                    Err(_) => panic!("the key server failed"),
                }
            }
        });
    (config, driver)
}

/// The asynchronous authentication step (both server runtimes): the verdict of an awaited
/// check is applied by the core — 401 with a challenge naming the metadata, 403
/// `insufficient_scope`, 503 when the check times out or fails (the server stays up), the
/// metadata itself served without a check, and a session bound to its principal.
async fn an_async_authenticator_guards_the_endpoint(rt: Runtime) {
    let calls = Arc::new(AtomicUsize::new(0));
    let (config, driver) = async_auth(calls.clone());
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let serving = bounded(
        "bind",
        rt.serve_with(loopback, users::server(), config, driver),
    )
    .await
    .expect("serve");
    let addr = serving.local_addr();
    // No token: 401, the challenge names the metadata.
    let resp = Req::post(addr, initialize()).send(addr).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let challenge = resp.headers()[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains("resource_metadata=") && challenge.starts_with("Bearer"),
        "{challenge}"
    );
    // The metadata: served, with no check.
    let before = calls.load(Ordering::SeqCst);
    let mut prm = Req::post(addr, json!({}));
    prm.method = Method::GET;
    let resp = bounded("metadata", async {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        let req = Request::get("/.well-known/oauth-protected-resource/mcp")
            .header(header::HOST, prm.host)
            .body(Full::new(Bytes::new()))
            .expect("request");
        sender.send_request(req).await.expect("response")
    })
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(body_json(resp).await["resource"], "http://127.0.0.1/mcp");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "the metadata needs no check"
    );
    // A scope too narrow: 403 insufficient_scope with the scope needed.
    let resp = Req::post(addr, initialize())
        .bearer("narrow")
        .send(addr)
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let challenge = resp.headers()[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains("insufficient_scope") && challenge.contains("mcp:tools"),
        "{challenge}"
    );
    // A check that hangs or fails: 503 with a JSON-RPC error, in bounded time.
    for token in ["slow", "boom"] {
        let resp = Req::post(addr, initialize()).bearer(token).send(addr).await;
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE, "{token}");
        let body = body_json(resp).await;
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("authentication is unavailable")),
            "{token}: {body}"
        );
    }
    // Alice's session: hers alone. Bob naming it gets 404, as if it did not exist.
    let resp = Req::post(addr, initialize())
        .bearer("alice")
        .send(addr)
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = body_json(resp).await;
    let mine = Req::post(addr, ping(2))
        .session(&id)
        .bearer("alice")
        .send(addr)
        .await;
    assert_eq!(mine.status(), StatusCode::OK);
    let theirs = Req::post(addr, ping(3))
        .session(&id)
        .bearer("bob")
        .send(addr)
        .await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    bounded("shutdown", serving.shutdown()).await;
}

// ---------------------------------------------------------------------------------------
// HTTPS: refused certificates, peers that fail or stall their handshake.
// ---------------------------------------------------------------------------------------

/// A certificate that is not for the host dialled, and one from a CA the client does not
/// trust, are each refused with the typed error that names the host and says why.
async fn refused_certificates_fail_typed_naming_the_host(server: Runtime, client_rt: Runtime) {
    use mcp_proto::client::TlsFailure;
    use mcp_tests::tls::TestPki;
    let connect = |url: String, trusted: &TestPki| {
        let tls = trusted.client_tls();
        async move {
            let builder = ServiceClient::builder("e2e", "1");
            let config = mcp_proto::client::ClientConfig::new();
            bounded(
                "connect",
                client_rt.connect_trusting(&url, builder, config, tls),
            )
            .await
        }
    };
    // Valid for `localhost` only; the URL names 127.0.0.1.
    let localhost_only = TestPki::new(&["localhost"]);
    let serving = bounded(
        "bind",
        server.serve_tls(
            users::server(),
            ServerConfig::default(),
            localhost_only.server_tls(),
        ),
    )
    .await
    .expect("serve");
    let err = connect(serving.url().to_owned(), &localhost_only)
        .await
        .expect_err("a certificate for another name");
    assert!(
        matches!(&err, ConnectError::Tls { host, reason: TlsFailure::NameMismatch } if host == "127.0.0.1"),
        "{err:?}"
    );
    assert!(err.to_string().contains("127.0.0.1"), "{err}");
    bounded("shutdown", serving.shutdown()).await;

    // Signed by a CA the client does not trust.
    let pki = TestPki::loopback();
    let serving = bounded(
        "bind",
        server.serve_tls(users::server(), ServerConfig::default(), pki.server_tls()),
    )
    .await
    .expect("serve");
    let err = connect(serving.url().to_owned(), &TestPki::loopback())
        .await
        .expect_err("an unknown CA");
    assert!(
        matches!(&err, ConnectError::Tls { host, reason: TlsFailure::UnknownIssuer } if host == "127.0.0.1"),
        "{err:?}"
    );
    // The control: the right CA gets a session.
    let client = connect(serving.url().to_owned(), &pki)
        .await
        .expect("the server's own CA");
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// Peers that send plaintext HTTP or garbage to a TLS server are dropped without a
/// response, a silent one is dropped at the handshake timeout, and none of them disturbs a
/// real client meanwhile; a handshake still pending does not delay the shutdown.
async fn failed_and_stalled_handshakes_disturb_no_one(rt: Runtime) {
    use mcp_tests::tls::TestPki;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = TestPki::loopback();
    // Long enough for the real client below to be done before the silent peer is dropped.
    let timeout = Duration::from_millis(1500);
    let tls = pki.server_tls().with_handshake_timeout(timeout);
    let serving = bounded(
        "bind",
        rt.serve_tls(users::server(), ServerConfig::default(), tls),
    )
    .await
    .expect("serve");
    let addr = serving.local_addr();
    let dial = || async move {
        bounded("dial", tokio::net::TcpStream::connect(addr))
            .await
            .expect("dial")
    };
    let mut silent = dial().await;
    let opened = std::time::Instant::now();
    let mut plain = dial().await;
    let request = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 2\r\n\r\n{{}}");
    plain.write_all(request.as_bytes()).await.expect("write");
    let mut garbage = dial().await;
    let noise: Vec<u8> = (0u8..=255).cycle().skip(7).take(4096).collect();
    garbage.write_all(&noise).await.expect("write");

    let client = bounded(
        "connect",
        Runtime::Tokio.connect_trusting(
            serving.url(),
            ServiceClient::builder("e2e", "1"),
            mcp_proto::client::ClientConfig::new(),
            pki.client_tls(),
        ),
    )
    .await
    .expect("a real client gets its session");
    let created = bounded(
        "create_user",
        client.call_tool(
            "create_user",
            json!({"name": "Al", "email": "al@x.io", "age": 3}),
        ),
    )
    .await
    .expect("create_user");
    assert_eq!(created.is_error, None, "{created:?}");
    assert!(
        opened.elapsed() < timeout,
        "the real client must not wait for the silent peer's handshake"
    );

    for (what, peer) in [("plaintext", &mut plain), ("garbage", &mut garbage)] {
        let mut seen = Vec::new();
        // The server answers with at most a TLS alert, then closes.
        let _ = bounded(what, peer.read_to_end(&mut seen)).await;
        assert!(!seen.starts_with(b"HTTP/"), "{what}: {seen:?}");
    }
    let mut one = [0u8; 1];
    let read = bounded("the silent peer is dropped", silent.read(&mut one)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(
        opened.elapsed() >= timeout / 2,
        "dropped at the timeout, not at once"
    );
    // Still serving after all that.
    let got = bounded(
        "get_user",
        client.call_tool("get_user", json!({"user_id": "user_1"})),
    )
    .await
    .expect("get_user");
    assert_eq!(got.structured_content.expect("structured")["name"], "Al");
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;

    // With the default (10 s) timeout, a pending handshake ends with the server.
    let serving = bounded(
        "bind",
        rt.serve_tls(users::server(), ServerConfig::default(), pki.server_tls()),
    )
    .await
    .expect("serve");
    let _silent = tokio::net::TcpStream::connect(serving.local_addr())
        .await
        .expect("dial");
    tokio::time::sleep(Duration::from_millis(50)).await;
    tokio::time::timeout(Duration::from_secs(3), serving.shutdown())
        .await
        .expect("the shutdown does not wait for a pending handshake");
}

/// A connection that sends no request within `DriverConfig::first_request_timeout` is closed,
/// over plain TCP and after a TLS handshake alike; one whose first request came in time
/// keeps its (long) GET stream past that deadline.
async fn a_connection_without_a_request_is_closed(rt: Runtime) {
    use mcp_tests::tls::TestPki;
    use tokio::io::AsyncReadExt;
    let deadline = Duration::from_millis(300);
    let limits = DriverConfig::default().with_first_request_timeout(deadline);
    let config =
        || ServerConfig::default().with_heartbeat_interval(Some(Duration::from_millis(100)));
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let serving = bounded(
        "bind",
        rt.serve_with(loopback, users::server(), config(), limits.clone()),
    )
    .await
    .expect("serve");
    let addr = serving.local_addr();
    let opened = std::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(addr).await.expect("dial");
    let id = open_session(addr).await;
    let mut stream = Req::get(addr, &id).send(addr).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let mut one = [0u8; 1];
    let read = bounded("the silent connection is closed", silent.read(&mut one)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(
        opened.elapsed() >= deadline / 2,
        "closed at the deadline, not at once"
    );
    // Heartbeats keep coming well past the deadline (each read waits for a new frame once
    // the buffered ones are taken).
    while opened.elapsed() < deadline * 3 {
        let beat = bounded("a heartbeat", stream.body_mut().frame()).await;
        assert!(
            matches!(&beat, Some(Ok(f)) if f.is_data()),
            "the GET stream is still open: {beat:?}"
        );
    }
    drop(stream);
    bounded("shutdown", serving.shutdown()).await;

    let pki = TestPki::loopback();
    let serving = bounded(
        "bind",
        rt.serve_tls_with(users::server(), config(), limits, pki.server_tls()),
    )
    .await
    .expect("serve");
    let connector =
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(pki.client_config(&[b"http/1.1"])));
    let tcp = tokio::net::TcpStream::connect(serving.local_addr())
        .await
        .expect("dial");
    let name = mcp_driver::tls::rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let mut tls = bounded("handshake", connector.connect(name, tcp))
        .await
        .expect("handshake");
    let read = bounded("the silent TLS connection is closed", tls.read(&mut one)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    bounded("shutdown", serving.shutdown()).await;
}

macro_rules! e2e {
    (
        server: [$($server:ident),* $(,)?],
        client: [$($client:ident),* $(,)?],
        pair: [$($pair:ident),* $(,)?] $(,)?
    ) => {
        e2e!(@same tokio_client_tokio_server, Tokio; server: [$($server),*], client: [$($client),*], pair: [$($pair),*]);
        e2e!(@same smol_client_smol_server, Smol; server: [$($server),*], client: [$($client),*], pair: [$($pair),*]);
        e2e!(@cross smol_client_tokio_server, Tokio, Smol; [$($pair),*]);
        e2e!(@cross tokio_client_smol_server, Smol, Tokio; [$($pair),*]);
    };
    (@same $module:ident, $rt:ident; server: [$($server:ident),*], client: [$($client:ident),*], pair: [$($pair:ident),*]) => {
        mod $module {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $server() {
                    super::$server(Runtime::$rt).await
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $client() {
                    super::$client(Runtime::$rt).await
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $pair() {
                    super::$pair(Runtime::$rt, Runtime::$rt).await
                }
            )*
        }
    };
    (@cross $module:ident, $server_rt:ident, $client_rt:ident; [$($pair:ident),*]) => {
        mod $module {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $pair() {
                    super::$pair(Runtime::$server_rt, Runtime::$client_rt).await
                }
            )*
        }
    };
}

e2e! {
    server: [
        users_lifecycle_over_loopback,
        a_foreign_host_is_refused,
        an_oversized_body_is_refused,
        shutdown_ends_open_streams,
        heartbeats_flow_on_an_idle_get_stream,
        a_client_that_leaves_cancels_its_handler,
        a_dropped_get_stream_is_noticed_before_any_write,
        requests_after_a_first_get_are_answered_on_its_connection,
        a_foreign_origin_is_refused,
        an_async_authenticator_guards_the_endpoint,
        failed_and_stalled_handshakes_disturb_no_one,
        a_connection_without_a_request_is_closed,
        options_is_answered_with_allow,
    ],
    client: [the_client_reports_a_refused_connection],
    pair: [
        the_client_drives_the_users_server,
        the_client_drives_the_users_server_over_https,
        everything_over_loopback,
        everything_over_https,
        concurrent_calls_all_complete,
        a_panicking_handler_gets_an_internal_error_not_a_hang,
        stateless_mode_end_to_end,
        json_response_mode_end_to_end,
        a_server_restart_is_repaired_by_reinitializing,
        a_post_stream_closed_for_polling_resumes_without_loss_or_repeat,
        a_post_stream_cut_mid_response_resumes_without_loss_or_repeat,
        listen_opened_and_events_reach_the_app,
        refused_certificates_fail_typed_naming_the_host,
    ],
}

/// The smol adapter turns heartbeats on whatever the configuration says (async-h1 notices a
/// departed client only on a failed write), at the core's default interval.
#[test]
fn heartbeats_required_restores_the_core_default() {
    let config = ServerConfig::default()
        .with_heartbeat_interval(None)
        .with_heartbeats_required();
    assert_eq!(
        config.streams.heartbeat_interval,
        Some(ServerConfig::DEFAULT_HEARTBEAT_INTERVAL)
    );
    let config = ServerConfig::default()
        .with_heartbeat_interval(Some(Duration::from_millis(30)))
        .with_heartbeats_required();
    assert_eq!(
        config.streams.heartbeat_interval,
        Some(Duration::from_millis(30))
    );
}

/// The custom-endpoints composition of `demo/examples/axum.rs`: [`McpService`] at `/mcp` in an
/// axum `Router` beside `GET /api/status`. Both routes answer; `initialize` and calls work
/// through axum, with raw HTTP and with the tokio client. Tokio only: `McpService` is
/// mcp-tokio's hyper service (mcp-smol has no framework to mount into).
#[tokio::test]
async fn tokio_only_mcp_service_mounted_in_axum_beside_a_status_route() {
    use axum::Router;
    use axum::extract::Request as AxumRequest;
    use axum::response::IntoResponse;
    use axum::routing::{any, get};
    use mcp_tokio::{McpService, RandomSessionIds};

    let listener = bounded("bind", tokio::net::TcpListener::bind("127.0.0.1:0"))
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let config = ServerConfig::default()
        .with_session_ids(RandomSessionIds)
        .bound_to(addr.ip());
    let service = McpService::new(users::server(), config);
    let mcp = service.clone();
    let app = Router::new()
        .route(
            "/api/status",
            get(|| async { axum::Json(json!({"status": "ok", "mcp": "/mcp"})) }),
        )
        .route(
            "/mcp",
            any(move |req: AxumRequest| {
                let mcp = mcp.clone();
                async move {
                    match mcp.handle(req).await {
                        Ok(response) => response.map(axum::body::Body::new),
                        Err(gone) => {
                            (StatusCode::SERVICE_UNAVAILABLE, gone.to_string()).into_response()
                        }
                    }
                }
            }),
        );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });

    // The ordinary route.
    let status = {
        let tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
            .await
            .expect("connect");
        let (mut sender, conn) = bounded(
            "handshake",
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)),
        )
        .await
        .expect("handshake");
        tokio::spawn(conn);
        let req = Request::get("/api/status")
            .header(header::HOST, addr.to_string())
            .body(Full::new(Bytes::new()))
            .expect("request");
        bounded("status", sender.send_request(req))
            .await
            .expect("status")
    };
    assert_eq!(status.status(), StatusCode::OK);
    assert_eq!(
        body_json(status).await,
        json!({"status": "ok", "mcp": "/mcp"})
    );

    // The MCP endpoint, raw: initialize issues a CSPRNG session id (checked by the helper).
    let id = open_session(addr).await;
    let resp = Req::post(addr, call(2, "get_user", json!({"user_id": "user_9"})))
        .session(&id)
        .send(addr)
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(body_json(resp).await["result"]["isError"], true);
    // A foreign Host is refused through axum too (`bound_to` kept loopback validation).
    let mut foreign = Req::post(addr, initialize());
    foreign.host = "evil.example".to_owned();
    assert_eq!(foreign.send(addr).await.status(), StatusCode::FORBIDDEN);

    // The tokio client through axum.
    let client = bounded(
        "connect",
        mcp_tokio::Client::connect(&format!("http://{addr}/mcp")),
    )
    .await
    .expect("connect");
    let created = bounded(
        "create_user",
        client.call_tool(
            "create_user",
            json!({"name": "Ax", "email": "ax@x.io", "age": 8}),
        ),
    )
    .await
    .expect("create_user");
    assert_eq!(
        created.structured_content.expect("structured")["id"],
        "user_1"
    );
    bounded("close", client.close()).await;

    service.shutdown();
    let _ = stop.send(());
    bounded("axum shutdown", served)
        .await
        .expect("task")
        .expect("axum served");
}

/// [`mcp_tokio::McpService`] mounted as it is, `Router::route_service("/mcp", service)`, with
/// what `serve` installs in the configuration; the method and status of every `/mcp` exchange
/// are logged (an axum middleware).
struct RouteService {
    addr: SocketAddr,
    service: mcp_tokio::McpService,
    seen: Arc<std::sync::Mutex<Vec<(Method, StatusCode)>>>,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RouteService {
    async fn start(config: ServerConfig) -> RouteService {
        use axum::extract::Request as AxumRequest;
        use axum::middleware::{Next, from_fn};
        let listener = bounded("bind", tokio::net::TcpListener::bind("127.0.0.1:0"))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let config = config
            .with_session_ids(mcp_tokio::RandomSessionIds)
            .bound_to(addr.ip());
        let service = mcp_tokio::McpService::new(users::server(), config);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = axum::Router::new()
            .route_service("/mcp", service.clone())
            .layer(from_fn(move |req: AxumRequest, next: Next| {
                let log = log.clone();
                async move {
                    let method = req.method().clone();
                    let resp = next.run(req).await;
                    log.lock().expect("log").push((method, resp.status()));
                    resp
                }
            }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        RouteService {
            addr,
            service,
            seen,
            stop,
            served,
        }
    }

    async fn stop(self) {
        self.service.shutdown();
        let _ = self.stop.send(());
        bounded("axum shutdown", self.served)
            .await
            .expect("task")
            .expect("axum served");
    }
}

/// `McpService` as a tower service: axum's `Router::route_service` mounts it without a
/// handler, and the tokio client runs a whole session through it (initialize, a tool call,
/// the GET stream, DELETE). Once the driver is gone it answers 503 (its `Error` is
/// `Infallible`).
#[tokio::test]
async fn tokio_only_mcp_service_mounted_by_route_service() {
    use mcp_proto::client::ClientConfig;
    let axum = RouteService::start(ServerConfig::default()).await;
    let url = format!("http://{}/mcp", axum.addr);
    let client = bounded("connect", Runtime::Tokio.connect(&url))
        .await
        .expect("connect");
    assert_eq!(
        client.server_info().map(|i| i.server_info.name),
        Some("StreamableHTTP API Server".to_owned())
    );
    let created = bounded(
        "create_user",
        client.call_tool(
            "create_user",
            json!({"name": "Ty", "email": "ty@x.io", "age": 3}),
        ),
    )
    .await
    .expect("create_user");
    assert_eq!(
        created.structured_content.expect("structured")["id"],
        "user_1"
    );
    bounded("close", client.close()).await;
    // The GET stream: a client that listens opens it.
    let builder = ServiceClient::builder("tower", "1");
    let config = ClientConfig::new().with_continuous_listening(true);
    let client = bounded(
        "connect",
        Runtime::Tokio.connect_with(&url, builder, config),
    )
    .await
    .expect("connect");
    assert!(bounded("listen_opened", client.listen_opened()).await);
    bounded("close", client.close()).await;

    let seen = axum.seen.lock().expect("log").clone();
    for method in [Method::POST, Method::GET, Method::DELETE] {
        assert!(
            seen.iter()
                .any(|(m, status)| *m == method && status.is_success()),
            "no successful {method} in {seen:?}"
        );
    }

    // The driver gone: 503, not an error (axum would have nothing to answer with).
    axum.service.shutdown();
    bounded("driver stopped", axum.service.stopped()).await;
    let resp = Req::post(axum.addr, initialize()).send(axum.addr).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    axum.stop().await;
}

/// A request body over `max_body_bytes` gets the same 413 through `route_service` as through
/// `mcp_tokio::serve`, whether its `Content-Length` says so or it streams chunked: the tower
/// service reads the body as the hyper one does.
#[tokio::test]
async fn tokio_only_route_service_refuses_an_oversized_body_as_serve_does() {
    let config = || ServerConfig::default().with_max_body_bytes(1024);
    let axum = RouteService::start(config()).await;
    let serving = start(Runtime::Tokio, config()).await;
    let oversized = |addr, chunked| {
        let mut req = Req::post(addr, Value::Null);
        req.body = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
            "x".repeat(16 * 1024)
        ));
        req.chunked = chunked;
        req
    };
    for chunked in [false, true] {
        let through_serve = oversized(serving.local_addr(), chunked)
            .send(serving.local_addr())
            .await
            .status();
        let through_axum = oversized(axum.addr, chunked).send(axum.addr).await.status();
        assert_eq!(
            through_serve,
            StatusCode::PAYLOAD_TOO_LARGE,
            "chunked {chunked}"
        );
        assert_eq!(through_axum, through_serve, "chunked {chunked}");
    }
    // Within the limit it is answered.
    let id = open_session(axum.addr).await;
    let resp = Req::post(axum.addr, ping(2))
        .session(&id)
        .send(axum.addr)
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    bounded("shutdown", serving.shutdown()).await;
    axum.stop().await;
}
