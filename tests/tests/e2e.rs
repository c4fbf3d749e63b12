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
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcp_proto::server::ServerConfig;
use mcp_proto::service::Server;
use mcp_tests::runtime::{ConnectError, Runtime, Serving};
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
    accept: &'static str,
    body: Bytes,
}

impl Req {
    fn post(addr: SocketAddr, body: Value) -> Req {
        Req {
            method: Method::POST,
            host: addr.to_string(),
            session: None,
            accept: "application/json, text/event-stream",
            body: Bytes::from(body.to_string()),
        }
    }

    fn get(addr: SocketAddr, session: &str) -> Req {
        Req {
            method: Method::GET,
            host: addr.to_string(),
            session: Some(session.to_owned()),
            accept: "text/event-stream",
            body: Bytes::new(),
        }
    }

    fn session(mut self, id: &str) -> Req {
        self.session = Some(id.to_owned());
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
        let req = req.body(Full::new(self.body)).expect("request");
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
    let handle = serving.shutdown_handle();
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
    use mcp_proto::service::{CallToolResult, Tool};
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

// ---------------------------------------------------------------------------------------
// Client scenarios: one client runtime.
// ---------------------------------------------------------------------------------------

/// A refused connection fails `initialize` (no hang); a non-http URL is refused at once.
async fn the_client_reports_a_refused_connection(rt: Runtime) {
    // Bind and drop: nothing listens on the port any more.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let err = bounded("connect", rt.connect(&format!("http://{addr}/mcp")))
        .await
        .expect_err("nothing listens");
    assert!(matches!(err, ConnectError::Initialize(_)), "{err}");
    assert!(matches!(
        rt.start(
            "https://x/mcp",
            mcp_proto::service::client::Client::builder("t", "1"),
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
    let serving = start(server, ServerConfig::default()).await;
    let client = bounded("connect", client_rt.connect(serving.url()))
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
    use mcp_proto::schema::LoggingLevel;
    use mcp_proto::service::client::{RequestOptions, ServerNotification};
    use mcp_tests::everything;
    use mcp_tests::harness::{SAMPLING_ANSWER, conformance_client};
    use std::sync::{Arc, Mutex};

    let config = ServerConfig::default().with_retry_interval(Duration::from_millis(50));
    let serving = serve(server, everything::server(), config).await;
    let client = bounded(
        "connect",
        client_rt.connect_with(
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
    use mcp_proto::schema::Tool;
    use mcp_proto::service::client::RequestError;

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

/// Instantiates every scenario: server scenarios per server runtime, client scenarios per
/// client runtime, pair scenarios per (server, client) pair. Each test gets a
/// multi-threaded tokio runtime for its body.
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
    ],
    client: [the_client_reports_a_refused_connection],
    pair: [
        the_client_drives_the_users_server,
        everything_over_loopback,
        concurrent_calls_all_complete,
        a_panicking_handler_gets_an_internal_error_not_a_hang,
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
        config.heartbeat_interval,
        Some(ServerConfig::DEFAULT_HEARTBEAT_INTERVAL)
    );
    let config = ServerConfig::default()
        .with_heartbeat_interval(Some(Duration::from_millis(30)))
        .with_heartbeats_required();
    assert_eq!(config.heartbeat_interval, Some(Duration::from_millis(30)));
}
