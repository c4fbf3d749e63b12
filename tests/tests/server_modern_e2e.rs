//! The modern era end to end on loopback: a service [`Server`] on each runtime's `serve`
//! (`mcp_tokio` and `mcp_smol`, one definition per scenario, instantiated for both at the
//! end) with both eras on, spoken to in raw HTTP with a hyper client. MRTR over real HTTP (S-NEW-5),
//! `subscriptions/listen` and cancellation by closing the stream (S-NEW-6, S-NEW-9), 405 for
//! GET (S-NEW-1). Every await is bounded.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcp_proto::mirror;
use mcp_proto::schema::{Elicit, ElicitRequestParams};
use mcp_proto::server::ServerConfig;
use mcp_proto::service::{CallToolResult, Server, Tool};
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
        .map_err(mcp_proto::service::Error::internal)?;
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
    mut params: Value,
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
    let config = ServerConfig::default().with_modern().with_param_headers(
        mcp_proto::service::bind::ServerBinding::param_headers_of(&server),
    );
    let serving = serve(rt, server, config).await;
    let addr = serving.local_addr();
    let params = json!({"name": "execute_sql", "arguments": {"region": "us-west1"}});
    let resp = send(addr, Method::POST, "tools/call", 1, params).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body_json(resp).await["error"]["code"], -32020);
    bounded("shutdown", serving.shutdown()).await;
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
];
