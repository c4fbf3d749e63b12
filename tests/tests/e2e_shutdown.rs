//! End to end on loopback, on each server runtime, the driver's draining shutdown and bounded
//! queues:
//!
//! - a slow tool call in flight when the shutdown starts still gets its result; a new
//!   request during the drain gets 503 with a JSON-RPC error; an open GET stream ends
//!   cleanly (a complete chunked body); the grace period bounds a drain;
//! - a client that stops reading its GET stream is cut once the exchange's reply queue is
//!   full, so what the server holds for it stays bounded however much it is sent.
//!
//! Raw HTTP with hyper (one connection per [`Conn`]) against a tokio and a smol server;
//! every await is bounded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use mcp_proto::server::ServerConfig;
use mcp_service::schema::LoggingLevel;
use mcp_service::{CallToolResult, Server, Tool, ToolArgs, required};
use mcp_tests::runtime::{DriverConfig, Runtime, Serving};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// `echo(text)`, `slow(ms)` (signals `started`, then sleeps), and `flood(count, size)`
/// (sends `count` log messages of `size` bytes to the session's GET stream).
fn server(started: Arc<Notify>) -> Server {
    Server::new("e2e-shutdown", "1")
        .tool(
            Tool::new("echo").string("text", required()),
            |_, args: ToolArgs| async move { Ok(CallToolResult::text(args.get_string("text", ""))) },
        )
        .tool(
            Tool::new("slow").integer("ms", required()),
            move |ctx, args: ToolArgs| {
                let started = started.clone();
                async move {
                    started.notify_one();
                    let ms = args.get_int("ms", 0).max(0) as u64;
                    ctx.sleep(Duration::from_millis(ms)).await;
                    Ok(CallToolResult::text("slow done"))
                }
            },
        )
        .tool(
            Tool::new("flood")
                .integer("count", required())
                .integer("size", required()),
            |ctx, args: ToolArgs| async move {
                let payload = "x".repeat(args.get_int("size", 0).max(0) as usize);
                for i in 0..args.get_int("count", 0) {
                    ctx.session().log(
                        LoggingLevel::Info,
                        Some("flood"),
                        json!({"i": i, "pad": payload}),
                    );
                }
                Ok(CallToolResult::text("flooded"))
            },
        )
}

async fn start(rt: Runtime, limits: DriverConfig) -> (Serving, Arc<Notify>) {
    let started = Arc::new(Notify::new());
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let serving = bounded(
        "serve",
        rt.serve_with(
            addr,
            server(started.clone()),
            ServerConfig::default(),
            limits,
        ),
    )
    .await
    .expect("serve");
    (serving, started)
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    send: SendRequest<Full<Bytes>>,
    addr: SocketAddr,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        let tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
            .await
            .expect("connect");
        let (send, conn) = bounded(
            "handshake",
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)),
        )
        .await
        .expect("handshake");
        tokio::spawn(conn);
        Conn { send, addr }
    }

    async fn request(
        &mut self,
        method: Method,
        session: Option<&str>,
        body: Option<Value>,
    ) -> http::Response<Incoming> {
        let accept = if method == Method::GET {
            "text/event-stream"
        } else {
            "application/json, text/event-stream"
        };
        let mut req = Request::builder()
            .method(method)
            .uri("/mcp")
            .header(header::HOST, self.addr.to_string())
            .header(header::ACCEPT, accept)
            .header(header::CONTENT_TYPE, "application/json")
            .header("MCP-Protocol-Version", "2025-11-25");
        if let Some(id) = session {
            req = req.header("Mcp-Session-Id", id);
        }
        let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
        let req = req.body(Full::new(body)).expect("request");
        bounded("ready", self.send.ready()).await.expect("ready");
        bounded("response head", self.send.send_request(req))
            .await
            .expect("response")
    }

    async fn post(&mut self, session: Option<&str>, body: Value) -> http::Response<Incoming> {
        self.request(Method::POST, session, Some(body)).await
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

fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}})
}

/// Initializes a session on `conn`; returns its id.
async fn open_session(conn: &mut Conn) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}});
    let resp = conn.post(None, init).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let id = resp
        .headers()
        .get("mcp-session-id")
        .expect("Mcp-Session-Id")
        .to_str()
        .expect("ascii")
        .to_owned();
    let init = body_json(resp).await;
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = conn.post(Some(&id), note).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let _ = bounded("202 body", resp.into_body().collect()).await;
    id
}

async fn a_drain_finishes_the_call_in_flight_and_refuses_new_requests(rt: Runtime) {
    let (serving, started) = start(rt, DriverConfig::default()).await;
    let addr = serving.local_addr();
    let mut a = Conn::open(addr).await;
    let mut b = Conn::open(addr).await;
    let sid = open_session(&mut a).await;
    // `b` is open and idle before the shutdown: its next request arrives during the drain.
    let ping = b
        .post(
            Some(&sid),
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        )
        .await;
    assert_eq!(ping.status(), StatusCode::OK);
    let _ = body_json(ping).await;

    let sid2 = sid.clone();
    let slow = tokio::spawn(async move {
        let resp = a
            .post(Some(&sid2), call(3, "slow", json!({"ms": 600})))
            .await;
        (resp.status(), body_json(resp).await)
    });
    bounded("the slow call starts", started.notified()).await;
    let handle = serving.handle().clone();
    handle.shutdown_within(Duration::from_secs(15));
    let waiting = tokio::spawn(serving.wait());

    // A new request during the drain: 503 and a JSON-RPC error, decided by the core.
    let refused = b
        .post(Some(&sid), call(4, "echo", json!({"text": "late"})))
        .await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let refused = body_json(refused).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert!(refused.get("result").is_none(), "{refused}");

    // The call in flight still gets its result.
    let (status, done) = bounded("the slow call", slow).await.expect("task");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(done["id"], 3, "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "slow done", "{done}");

    bounded("the server stops after the drain", waiting)
        .await
        .expect("task");
}

async fn a_drain_ends_an_open_get_stream_cleanly(rt: Runtime) {
    let (serving, _) = start(rt, DriverConfig::default()).await;
    let addr = serving.local_addr();
    let mut a = Conn::open(addr).await;
    let sid = open_session(&mut a).await;
    let mut g = Conn::open(addr).await;
    let stream = g.request(Method::GET, Some(&sid), None).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(
        stream.headers().get(header::CONTENT_TYPE).expect("type"),
        "text/event-stream"
    );
    let handle = serving.handle().clone();
    let waiting = tokio::spawn(serving.wait());
    handle.shutdown_within(Duration::from_secs(15));
    // A clean end: the chunked body completes (a cut connection would be an error here).
    let body = bounded("the GET stream ends", stream.into_body().collect()).await;
    assert!(body.is_ok(), "the GET stream did not end cleanly: {body:?}");
    bounded("the server stops after the drain", waiting)
        .await
        .expect("task");
}

async fn the_grace_period_bounds_a_drain(rt: Runtime) {
    let (serving, started) = start(rt, DriverConfig::default()).await;
    let addr = serving.local_addr();
    let mut a = Conn::open(addr).await;
    let sid = open_session(&mut a).await;
    let slow = tokio::spawn(async move {
        let resp = a
            .post(Some(&sid), call(3, "slow", json!({"ms": 60_000})))
            .await;
        (resp.status(), body_json(resp).await)
    });
    bounded("the slow call starts", started.notified()).await;
    let t0 = tokio::time::Instant::now();
    bounded(
        "shutdown within 300 ms",
        serving.shutdown_within(Duration::from_millis(300)),
    )
    .await;
    // The drain gave up at its deadline, not at the end of the 60 s call.
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    let (status, body) = bounded("the cut call", slow).await.expect("task");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
}

/// Sends a GET for `sid`'s stream on a raw socket and never reads it.
async fn stalled_get(addr: SocketAddr, sid: &str) -> tokio::net::TcpStream {
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect");
    let req = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    bounded("write GET", tcp.write_all(req.as_bytes()))
        .await
        .expect("write");
    tcp
}

async fn a_client_that_stops_reading_is_cut_by_the_core_backlog_budget(rt: Runtime) {
    const COUNT: i64 = 4_000;
    const SIZE: i64 = 16 * 1024;
    let sent = (COUNT * SIZE) as usize; // 64 MiB of log messages
    let (serving, _) = start(rt, DriverConfig::default()).await;
    let addr = serving.local_addr();
    let mut a = Conn::open(addr).await;
    let sid = open_session(&mut a).await;
    let mut get = stalled_get(addr, &sid).await;
    // Let the GET reach the router before the flood.
    let resp = a
        .post(Some(&sid), call(2, "echo", json!({"text": "x"})))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let _ = body_json(resp).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let resp = a
        .post(
            Some(&sid),
            call(3, "flood", json!({"count": COUNT, "size": SIZE})),
        )
        .await;
    let done = body_json(resp).await;
    assert_eq!(done["result"]["content"][0]["text"], "flooded", "{done}");
    // Give the server time to push what it would push, then read everything it kept for
    // this client: the kernel's socket buffers, hyper's write buffer and the core's send window.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(3), get.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break, // closed or reset: the cut
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!(
                "the stalled GET was not cut ({} bytes read so far)",
                got.len()
            ),
        }
        assert!(got.len() < sent, "the whole flood was kept for the client");
    }
    // Kernel buffers on loopback are a few MiB; the unbounded queue would have kept all
    // 64 MiB for this client.
    assert!(
        got.len() < sent / 4,
        "{} bytes were kept for a client that did not read (sent {sent})",
        got.len()
    );
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&got[..got.len().min(200)])
    );
    // Cut, not ended: no final chunk.
    assert!(!got.ends_with(b"0\r\n\r\n"), "the stream was ended cleanly");
    // The server still serves this session.
    let resp = a
        .post(Some(&sid), call(4, "echo", json!({"text": "still here"})))
        .await;
    let body = body_json(resp).await;
    assert_eq!(body["result"]["content"][0]["text"], "still here", "{body}");
    bounded("shutdown", serving.shutdown()).await;
}

/// Each scenario on each server runtime.
macro_rules! on_every_server {
    ($($name:ident),* $(,)?) => {
        mod tokio_server {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(Runtime::Tokio).await
                }
            )*
        }
        mod smol_server {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(Runtime::Smol).await
                }
            )*
        }
    };
}

on_every_server!(
    a_drain_finishes_the_call_in_flight_and_refuses_new_requests,
    a_drain_ends_an_open_get_stream_cleanly,
    the_grace_period_bounds_a_drain,
    a_client_that_stops_reading_is_cut_by_the_core_backlog_budget,
);
