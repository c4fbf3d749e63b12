//! The modern era end to end on loopback: a service [`Server`] on each runtime's `serve`
//! (`mcp_tokio` and `mcp_smol`, one definition per scenario, instantiated for both at the
//! end) with both eras on, spoken to in raw HTTP with a hyper client. MRTR over real HTTP (S-NEW-5),
//! `subscriptions/listen` and cancellation by closing the stream (S-NEW-6, S-NEW-9), 405 for
//! GET (S-NEW-1), the sealed `requestState` across instances that share a key. Every await is
//! bounded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcp_proto::mirror;
use mcp_proto::server::{AuthDecision, RequestHead, ServerConfig};
use mcp_service::schema::{Elicit, ElicitRequestParams};
use mcp_service::server::seal::StateKeys;
use mcp_service::{CallToolResult, Server, Tool};
use mcp_tests::runtime::{Runtime, Serving};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(10);
const V: &str = "2026-07-28";

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

fn server() -> Server {
    Server::new("modern-e2e", "1").tool(Tool::new("greet"), |ctx, _| async move {
        let ask: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
        }))
        .map_err(mcp_service::Error::internal)?;
        let answer = ctx.send_request::<Elicit>(ask).await?;
        let name = serde_json::to_value(&answer.content).unwrap_or_default()["name"]
            .as_str()
            .unwrap_or("nobody")
            .to_owned();
        Ok(CallToolResult::text(format!("hello {name}")))
    })
}

async fn start(rt: Runtime, server: &Server) -> Serving {
    serve(rt, server.clone(), ServerConfig::default().with_modern()).await
}

async fn serve(rt: Runtime, server: Server, config: ServerConfig) -> Serving {
    bounded("bind", rt.serve(server, config))
        .await
        .expect("serve")
}

/// A modern request on a fresh connection, with `_meta` and the mirrored headers.
async fn send(
    addr: SocketAddr,
    method: Method,
    rpc: &str,
    id: i64,
    params: Value,
) -> http::Response<Incoming> {
    send_as(addr, method, rpc, id, params, None).await
}

/// [`send`], with `Authorization: Bearer <bearer>` when given.
async fn send_as(
    addr: SocketAddr,
    method: Method,
    rpc: &str,
    id: i64,
    mut params: Value,
    bearer: Option<&str>,
) -> http::Response<Incoming> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}
    });
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
        .method(method)
        .uri("/mcp")
        .header(header::HOST, addr.to_string())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .header("MCP-Protocol-Version", V);
    if let Some(who) = bearer {
        req = req.header(header::AUTHORIZATION, format!("Bearer {who}"));
    }
    let raw = serde_json::value::to_raw_value(&params).expect("params");
    for (name, value) in mirror::mirror_headers(rpc, Some(&raw)) {
        req = req.header(name, value);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": rpc, "params": params});
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    bounded("response head", sender.send_request(req))
        .await
        .expect("response")
}

async fn body_json(resp: http::Response<Incoming>) -> Value {
    let bytes = bounded("body", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
}

/// Reads SSE body frames until a `data:` event arrives; returns its JSON.
async fn next_event(body: &mut Incoming, buf: &mut Vec<u8>) -> Value {
    loop {
        if let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let data: String = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect::<Vec<_>>()
                .join("\n");
            if !data.is_empty() {
                return serde_json::from_str(&data).expect("event JSON");
            }
            continue;
        }
        let frame = bounded("SSE frame", body.frame())
            .await
            .expect("stream ended")
            .expect("frame");
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
    }
}

async fn s_new_5_mrtr_round_trip_over_http(rt: Runtime) {
    let server = server();
    let serving = start(rt, &server).await;
    let addr = serving.local_addr();
    let resp = send(
        addr,
        Method::POST,
        "tools/call",
        1,
        json!({"name": "greet"}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers().get("mcp-session-id").is_none());
    let first = body_json(resp).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let key = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let retry = json!({"name": "greet", "requestState": result["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}});
    let resp = send(addr, Method::POST, "tools/call", 2, retry).await;
    let done = body_json(resp).await;
    assert_eq!(done["result"]["content"][0]["text"], "hello Ada", "{done}");
    let get = send(addr, Method::GET, "tools/list", 3, json!({})).await;
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    bounded("shutdown", serving.shutdown()).await;
}

async fn s_new_6_listen_stream_delivers_then_closing_cancels(rt: Runtime) {
    let server = server();
    let serving = start(rt, &server).await;
    let addr = serving.local_addr();
    let resp = send(
        addr,
        Method::POST,
        "subscriptions/listen",
        1,
        json!({"notifications": {"toolsListChanged": true}}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-accel-buffering"], "no");
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let ack = next_event(&mut body, &mut buf).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(server.listener_count(), 1);
    server.add_tool(Tool::new("more"), |_, _| async {
        Ok(CallToolResult::text("more"))
    });
    let changed = next_event(&mut body, &mut buf).await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    drop(body);
    bounded("listener unregistered after the close", async {
        while server.listener_count() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    bounded("shutdown", serving.shutdown()).await;
}

async fn s_new_8_mcp_param_headers_checked_over_http(rt: Runtime) {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}}});
    let server = Server::new("sql", "1").tool(
        Tool::with_schema("execute_sql", schema.as_object().unwrap().clone()),
        |_, _| async { Ok(CallToolResult::text("rows")) },
    );
    let config = ServerConfig::default()
        .with_modern()
        .with_param_headers(mcp_service::bind::ServerBinding::param_headers_of(&server));
    let serving = serve(rt, server, config).await;
    let addr = serving.local_addr();
    let params = json!({"name": "execute_sql", "arguments": {"region": "us-west1"}});
    let resp = send(addr, Method::POST, "tools/call", 1, params).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_json(resp).await["error"]["code"], -32020);
    bounded("shutdown", serving.shutdown()).await;
}

/// The greeter, counting how often its handler starts.
fn counted(runs: Arc<AtomicUsize>) -> Server {
    Server::new("sealed-e2e", "1").tool(Tool::new("greet"), move |ctx, _| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            let ask: ElicitRequestParams = serde_json::from_value(json!({
                "mode": "form", "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
            }))
            .map_err(mcp_service::Error::internal)?;
            let answer = ctx.send_request::<Elicit>(ask).await?;
            let name = serde_json::to_value(&answer.content).unwrap_or_default()["name"]
                .as_str()
                .unwrap_or("nobody")
                .to_owned();
            Ok(CallToolResult::text(format!("hello {name}")))
        }
    })
}

/// Both eras, and the caller named by its bearer token (none: 401).
fn by_bearer() -> ServerConfig {
    ServerConfig::default()
        .with_modern()
        .with_authenticator(|head: &RequestHead<'_>| {
            match head
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
            {
                Some(who) => AuthDecision::allow(who),
                None => AuthDecision::unauthorized(),
            }
        })
}

/// `state` with its payload edited by `edit` and re-encoded, its tag kept (the payload is
/// readable, not encrypted: only the tag protects it).
fn forge(state: &str, edit: impl FnOnce(&mut Value)) -> String {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    let (payload, tag) = state["v1.".len()..]
        .split_once('.')
        .expect("v1.payload.tag");
    let mut json: Value =
        serde_json::from_slice(&B64.decode(payload).expect("base64url")).expect("JSON payload");
    edit(&mut json);
    format!("v1.{}.{tag}", B64.encode(json.to_string()))
}

/// `state` with the character at `at` replaced by another base64url character.
fn flip(state: &str, at: usize) -> String {
    let mut bytes = state.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).expect("ASCII")
}

/// The sealed `requestState` over real HTTP, across server instances: three instances of
/// one deployment, each on its own port: `a` and `b` share a key (`StateKeys::new`), `c` has
/// another. A state `a` handed out and then tampered with (one character of the payload or of
/// the tag flipped, the tag cut short, the payload re-bound to another principal under the
/// old tag), presented to `c`, or presented by another principal, gets a JSON-RPC
/// `-32602` in an HTTP 200 answer, and no handler runs; the genuine state completes on `b`
/// (and one from `b` on `a`): the retry may land on any instance that shares the key.
async fn sealed_request_state_crosses_instances_sharing_a_key(rt: Runtime) {
    let runs = Arc::new(AtomicUsize::new(0));
    let shared = || StateKeys::new([0x5a; 32]).expect("a 32-byte key");
    let a = serve(
        rt,
        counted(runs.clone()).request_state_keys(shared()),
        by_bearer(),
    )
    .await;
    let b = serve(
        rt,
        counted(runs.clone()).request_state_keys(shared()),
        by_bearer(),
    )
    .await;
    let other = StateKeys::new([0xa5; 32]).expect("a 32-byte key");
    let c = serve(
        rt,
        counted(runs.clone()).request_state_keys(other),
        by_bearer(),
    )
    .await;
    let (a_addr, b_addr, c_addr) = (a.local_addr(), b.local_addr(), c.local_addr());

    // Round one on `a`, as alice: input required, with a sealed state.
    let greet = json!({"name": "greet"});
    let resp = send_as(
        a_addr,
        Method::POST,
        "tools/call",
        1,
        greet.clone(),
        Some("alice"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let first = body_json(resp).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    let key = first["result"]["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("an input request");
    assert!(state.starts_with("v1."), "{state}");
    let tag_at = state.rfind('.').expect("a tag") + 1;
    let retry = |state: &str| {
        json!({"name": "greet", "requestState": state,
            "inputResponses": {&key: {"action": "accept", "content": {"name": "Ada"}}}})
    };
    let refused = |what: &'static str, message: &'static str| {
        move |status: StatusCode, body: Value| {
            assert_eq!(status, StatusCode::OK, "{what}: {body}");
            assert_eq!(body["error"]["code"], -32602, "{what}: {body}");
            assert!(body.get("result").is_none(), "{what}: {body}");
            let got = body["error"]["message"].as_str().unwrap_or_default();
            assert!(got.contains(message), "{what}: {body}");
        }
    };
    let before = runs.load(Ordering::SeqCst);
    let as_mallory = forge(&state, |p| p["p"] = "mallory".into());
    assert_ne!(as_mallory, state);
    let cases: [(SocketAddr, String, &str, _); 6] = [
        (
            a_addr,
            flip(&state, 3 + 8),
            "alice",
            refused("a payload byte flipped", "fails verification"),
        ),
        (
            b_addr,
            flip(&state, tag_at + 8),
            "alice",
            refused("a tag byte flipped", "fails verification"),
        ),
        (
            c_addr,
            state.clone(),
            "alice",
            refused("another key's instance", "fails verification"),
        ),
        (
            b_addr,
            state.clone(),
            "mallory",
            refused("another principal", "another principal"),
        ),
        (
            b_addr,
            as_mallory,
            "mallory",
            refused(
                "the payload re-bound to another principal",
                "fails verification",
            ),
        ),
        (
            b_addr,
            state[..state.len() - 1].to_owned(),
            "alice",
            refused("a truncated tag", "fails verification"),
        ),
    ];
    for (n, (addr, state, who, check)) in cases.into_iter().enumerate() {
        let id = 10 + n as i64;
        let resp = send_as(
            addr,
            Method::POST,
            "tools/call",
            id,
            retry(&state),
            Some(who),
        )
        .await;
        let status = resp.status();
        check(status, body_json(resp).await);
    }
    assert_eq!(runs.load(Ordering::SeqCst), before, "no handler ran");

    // The genuine state on `b`, which shares `a`'s key: the retry completes there.
    let resp = send_as(
        b_addr,
        Method::POST,
        "tools/call",
        2,
        retry(&state),
        Some("alice"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let done = body_json(resp).await;
    assert_eq!(done["result"]["content"][0]["text"], "hello Ada", "{done}");

    // And the other way round: a state `b` hands out completes on `a`.
    let resp = send_as(b_addr, Method::POST, "tools/call", 3, greet, Some("bob")).await;
    let from_b = body_json(resp).await["result"]["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    let resp = send_as(
        a_addr,
        Method::POST,
        "tools/call",
        4,
        retry(&from_b),
        Some("bob"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let done = body_json(resp).await;
    assert_eq!(done["result"]["content"][0]["text"], "hello Ada", "{done}");
    for serving in [a, b, c] {
        bounded("shutdown", serving.shutdown()).await;
    }
}

/// Instantiates every scenario for each server runtime.
macro_rules! on_every_runtime {
    ($($name:ident),* $(,)?) => {
        mod tokio_server {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(Runtime::Tokio).await
                }
            )*
        }
        mod smol_server {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(Runtime::Smol).await
                }
            )*
        }
    };
}

on_every_runtime![
    s_new_5_mrtr_round_trip_over_http,
    s_new_6_listen_stream_delivers_then_closing_cancels,
    s_new_8_mcp_param_headers_checked_over_http,
    sealed_request_state_crosses_instances_sharing_a_key,
];
