//! HTTP/2 on the tokio adapter, on loopback with certificates made by the test: the server
//! speaks HTTP/2 and HTTP/1.1 (ALPN over TLS, prior knowledge on plain TCP), the client
//! multiplexes its GET stream and its POSTs over one HTTP/2 connection, a stream the client
//! resets is a disconnect to the core, and a drain ends HTTP/2 connections cleanly. The
//! smol server speaks HTTP/1.1 alone (async-h1): it is the control where one is needed.
//! Every await is bounded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Version, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_driver::tls::rustls::pki_types::ServerName;
use mcp_proto::server::ServerConfig;
use mcp_service::client::Client as ServiceClient;
use mcp_tests::runtime::{Runtime, Serving};
use mcp_tests::tls::TestPki;
use mcp_tests::users;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(10);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// A TLS connection to `addr` offering `alpn`, trusting `pki`; and the protocol the server
/// chose.
async fn dial_tls(
    addr: SocketAddr,
    pki: &TestPki,
    alpn: &[&[u8]],
) -> (tokio_rustls::client::TlsStream<TcpStream>, Option<Vec<u8>>) {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(pki.client_config(alpn)));
    let tcp = bounded("dial", TcpStream::connect(addr))
        .await
        .expect("dial");
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let tls = bounded("handshake", connector.connect(name, tcp))
        .await
        .expect("TLS handshake");
    let chosen = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    (tls, chosen)
}

/// An HTTP/2 connection over `io`.
async fn h2<I>(io: I) -> http2::SendRequest<Full<Bytes>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = bounded(
        "h2 handshake",
        http2::handshake(TokioExecutor::new(), TokioIo::new(io)),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    sender
}

fn post(addr: SocketAddr, session: Option<&str>, body: &Value) -> Request<Full<Bytes>> {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(format!("https://{addr}/mcp"))
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .header("MCP-Protocol-Version", "2025-06-18");
    if let Some(id) = session {
        req = req.header("Mcp-Session-Id", id);
    }
    req.body(Full::new(Bytes::from(body.to_string())))
        .expect("request")
}

fn get(addr: SocketAddr, session: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(Method::GET)
        .uri(format!("https://{addr}/mcp"))
        .header(header::ACCEPT, "text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .header("Mcp-Session-Id", session)
        .body(Full::new(Bytes::new()))
        .expect("request")
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "h2", "version": "1"}}})
}

async fn send(
    sender: &mut http2::SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> Response<Incoming> {
    bounded("ready", sender.ready()).await.expect("ready");
    bounded("response", sender.send_request(req))
        .await
        .expect("response")
}

async fn body_json(resp: Response<Incoming>) -> Value {
    let bytes = bounded("body", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    // A JSON body, or one SSE event carrying it.
    let text = String::from_utf8_lossy(&bytes);
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(&text);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Initializes a session over `sender`; returns its id.
async fn open_session(sender: &mut http2::SendRequest<Full<Bytes>>, addr: SocketAddr) -> String {
    let resp = send(sender, post(addr, None, &initialize())).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.version(), Version::HTTP_2);
    let id = resp
        .headers()
        .get("mcp-session-id")
        .expect("Mcp-Session-Id")
        .to_str()
        .expect("ascii")
        .to_owned();
    let _ = body_json(resp).await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = send(sender, post(addr, Some(&id), &note)).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    id
}

async fn serve_tls(rt: Runtime, pki: &TestPki, config: ServerConfig) -> Serving {
    bounded(
        "bind",
        rt.serve_tls(users::server(), config, pki.server_tls()),
    )
    .await
    .expect("serve")
}

/// The tokio server chooses `h2` when the client offers it and `http/1.1` when it offers
/// only that, and speaks what it chose: responses come back as HTTP/2 (without the
/// connection-specific headers HTTP/2 forbids) or HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokio_server_speaks_h2_and_http11_as_alpn_chose() {
    let pki = TestPki::loopback();
    let serving = serve_tls(Runtime::Tokio, &pki, ServerConfig::default()).await;
    let addr = serving.local_addr();

    let (tls, chosen) = dial_tls(addr, &pki, &[b"h2", b"http/1.1"]).await;
    assert_eq!(chosen.as_deref(), Some(&b"h2"[..]));
    let mut sender = h2(tls).await;
    let resp = send(&mut sender, post(addr, None, &initialize())).await;
    assert_eq!(resp.version(), Version::HTTP_2);
    assert_eq!(resp.status(), StatusCode::OK);
    for forbidden in [header::CONNECTION, header::TRANSFER_ENCODING] {
        assert!(resp.headers().get(&forbidden).is_none(), "{forbidden}");
    }
    let init = body_json(resp).await;
    assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");

    let (tls, chosen) = dial_tls(addr, &pki, &[b"http/1.1"]).await;
    assert_eq!(chosen.as_deref(), Some(&b"http/1.1"[..]));
    let (mut sender, conn) = bounded(
        "h1 handshake",
        hyper::client::conn::http1::handshake(TokioIo::new(tls)),
    )
    .await
    .expect("h1 handshake");
    tokio::spawn(conn);
    let mut req = post(addr, None, &initialize());
    *req.uri_mut() = "/mcp".parse().expect("path");
    req.headers_mut()
        .insert(header::HOST, addr.to_string().parse().expect("host"));
    let resp = bounded("h1 response", sender.send_request(req))
        .await
        .expect("response");
    assert_eq!(resp.version(), Version::HTTP_11);
    assert_eq!(resp.status(), StatusCode::OK);
    bounded("shutdown", serving.shutdown()).await;

    // The smol server offers http/1.1 alone, whatever the client offers.
    let serving = serve_tls(Runtime::Smol, &pki, ServerConfig::default()).await;
    let (_tls, chosen) = dial_tls(serving.local_addr(), &pki, &[b"h2", b"http/1.1"]).await;
    assert_eq!(chosen.as_deref(), Some(&b"http/1.1"[..]));
    bounded("shutdown", serving.shutdown()).await;
}

/// On plain TCP the tokio server takes HTTP/2 with prior knowledge (h2c) beside HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokio_server_takes_h2c_with_prior_knowledge() {
    let serving = bounded(
        "bind",
        Runtime::Tokio.serve(users::server(), ServerConfig::default()),
    )
    .await
    .expect("serve");
    let addr = serving.local_addr();
    let tcp = bounded("dial", TcpStream::connect(addr))
        .await
        .expect("dial");
    let mut sender = h2(tcp).await;
    let mut req = post(addr, None, &initialize());
    *req.uri_mut() = format!("http://{addr}/mcp").parse().expect("uri");
    let resp = send(&mut sender, req).await;
    assert_eq!(resp.version(), Version::HTTP_2);
    assert_eq!(resp.status(), StatusCode::OK);
    bounded("shutdown", serving.shutdown()).await;
}

/// A TCP proxy to `upstream` that counts the connections it accepted (TLS passes through).
async fn counting_proxy(upstream: SocketAddr) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (addr, count)
}

/// The tokio client negotiates HTTP/2 over TLS: its GET stream and 16 concurrent calls
/// share one connection. Against the smol server (HTTP/1.1) the same client needs more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokio_client_multiplexes_its_streams_over_one_h2_connection() {
    let pki = TestPki::loopback();
    for (server, one_connection) in [(Runtime::Tokio, true), (Runtime::Smol, false)] {
        let serving = serve_tls(server, &pki, ServerConfig::default()).await;
        let (proxy, connections) = counting_proxy(serving.local_addr()).await;
        let config = mcp_proto::client::ClientConfig::new().with_continuous_listening(true);
        let client = bounded(
            "connect",
            Runtime::Tokio.connect_trusting(
                &format!("https://{proxy}/mcp"),
                ServiceClient::builder("h2", "1"),
                config,
                pki.client_tls(),
            ),
        )
        .await
        .expect("connect");
        assert!(bounded("listen_opened", client.listen_opened()).await);
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..16 {
            let c = client.client().clone();
            calls.spawn(async move {
                let args =
                    json!({"name": format!("n{i}"), "email": format!("u{i}@x.io"), "age": i});
                c.call_tool("create_user", args).await
            });
        }
        while let Some(done) = bounded("calls", calls.join_next()).await {
            done.expect("task").expect("call");
        }
        let n = connections.load(Ordering::SeqCst);
        if one_connection {
            assert_eq!(n, 1, "{server} server: every stream on one connection");
        } else {
            assert!(
                n > 1,
                "{server} server: HTTP/1.1 needs a connection per stream ({n})"
            );
        }
        bounded("close", client.close()).await;
        bounded("shutdown", serving.shutdown()).await;
    }
}

/// A GET stream the client resets (RST_STREAM on a connection that stays open) is a
/// disconnect to the core: its session, idle, is evicted after `session_idle_ttl`, while a
/// session whose stream on the same connection is still open is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_h2_stream_is_a_disconnect() {
    let pki = TestPki::loopback();
    let ttl = Duration::from_millis(300);
    let config = ServerConfig::default().with_session_idle_ttl(Some(ttl));
    let serving = serve_tls(Runtime::Tokio, &pki, config).await;
    let addr = serving.local_addr();
    let (tls, _) = dial_tls(addr, &pki, &[b"h2"]).await;
    let mut sender = h2(tls).await;
    let kept = open_session(&mut sender, addr).await;
    let left = open_session(&mut sender, addr).await;
    let kept_stream = send(&mut sender, get(addr, &kept)).await;
    assert_eq!(kept_stream.status(), StatusCode::OK);
    let left_stream = send(&mut sender, get(addr, &left)).await;
    assert_eq!(left_stream.status(), StatusCode::OK);
    // Dropping the response body resets its stream; the connection stays.
    drop(left_stream);
    tokio::time::sleep(ttl * 6).await;
    let ping = |id| json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
    let resp = send(&mut sender, post(addr, Some(&kept), &ping(2))).await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "the session with a stream is kept"
    );
    let resp = send(&mut sender, post(addr, Some(&left), &ping(3))).await;
    assert_eq!(
        resp.status(),
        StatusCode::NOT_FOUND,
        "the session whose stream was reset was evicted"
    );
    drop(kept_stream);
    bounded("shutdown", serving.shutdown()).await;
}

/// `shutdown_within` drains HTTP/2 connections: an open GET stream ends cleanly, a new
/// request on the same connection gets the core's 503, a call in flight finishes and its
/// response is written, then the shutdown completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_h2_connections() {
    use mcp_service::schema::{CallToolResult, Tool};
    let pki = TestPki::loopback();
    let (started, release) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let (start, gate) = (started.clone(), release.clone());
    let server =
        mcp_service::Server::new("slow", "1").tool(Tool::new("slow"), move |_ctx, _args| {
            let (start, gate) = (start.clone(), gate.clone());
            async move {
                start.notify_one();
                gate.notified().await;
                Ok(CallToolResult::text("done"))
            }
        });
    let serving = bounded(
        "bind",
        Runtime::Tokio.serve_tls(server, ServerConfig::default(), pki.server_tls()),
    )
    .await
    .expect("serve");
    let addr = serving.local_addr();
    let (tls, _) = dial_tls(addr, &pki, &[b"h2"]).await;
    let mut sender = h2(tls).await;
    let id = open_session(&mut sender, addr).await;
    let stream = send(&mut sender, get(addr, &id)).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.version(), Version::HTTP_2);
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "slow", "arguments": {}}});
    let mut caller = sender.clone();
    let request = post(addr, Some(&id), &call);
    let answer = tokio::spawn(async move {
        let resp = send(&mut caller, request).await;
        assert_eq!(resp.status(), StatusCode::OK);
        body_json(resp).await
    });
    bounded("the call is in its handler", started.notified()).await;

    let handle = serving.handle().clone();
    let done = tokio::spawn(serving.shutdown_within(Duration::from_secs(5)));
    bounded("draining", handle.draining()).await;
    let ended = bounded("the GET stream ends", stream.into_body().collect()).await;
    assert!(ended.is_ok(), "a clean end, not a reset: {ended:?}");
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    let late = send(&mut sender, post(addr, Some(&id), &ping)).await;
    assert_eq!(late.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(!done.is_finished(), "a call is still in flight");
    release.notify_one();
    let answer = bounded("the call in flight", answer).await.expect("join");
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    bounded("shutdown", done).await.expect("join");
}
