//! How the server driver starts request handlers (`DriverConfig::spawn_handlers`): by default it
//! polls a new handler once on its own task, so a handler that answers without waiting costs
//! no task; one that waits is spawned then and still answers; with `spawn_handlers` every
//! handler gets a task of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_driver::{DriverConfig, Runtime, ServerHandle};
use mcp_proto::server::ServerConfig;
use mcp_service::server::BoxFuture;
use mcp_service::{CallToolResult, Server, Tool, ToolArgs};
use serde_json::{Value, json};
use smol::stream::StreamExt;

/// tokio, counting the tasks the driver spawns.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicUsize>);

impl Counting {
    fn spawned(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Runtime for Counting {
    type Sleep = tokio::time::Sleep;

    fn sleep_until(&self, deadline: Instant) -> tokio::time::Sleep {
        tokio::time::sleep_until(deadline.into())
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) {
        self.0.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(task);
    }
}

fn server() -> Server {
    Server::new("handler-start", "1")
        .tool(Tool::new("now"), |_ctx, _args: ToolArgs| async move {
            Ok(CallToolResult::text("now"))
        })
        .tool(Tool::new("later"), |ctx, _args: ToolArgs| async move {
            ctx.sleep(Duration::from_millis(5)).await;
            Ok(CallToolResult::text("later"))
        })
}

/// POSTs `body` (with `session`, if any); the status, the session id it names and the body.
async fn post(
    handle: &ServerHandle,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Value) {
    let mut request = http::Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    let (parts, ()) = request.body(()).unwrap().into_parts();
    let chunks = smol::stream::iter([Ok::<_, std::io::Error>(Bytes::from(body.to_string()))]);
    let mut response = handle
        .exchange(parts, chunks, ())
        .await
        .expect("the driver answers");
    let session = response
        .headers
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let mut bytes = Vec::new();
    while let Some(chunk) = response.body.next().await {
        bytes.extend_from_slice(&chunk.expect("a whole body"));
    }
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (response.status.as_u16(), session, value)
}

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// Initializes a session on a driver started with `limits`; the runtime and the session.
async fn start(limits: DriverConfig) -> (Counting, ServerHandle, String) {
    let rt = Counting::default();
    let handle = ServerHandle::start(&rt, server(), ServerConfig::default(), limits);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let (status, session, _) = post(&handle, None, init).await;
    assert_eq!(status, 200);
    let session = session.expect("a session id");
    let ready = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&handle, Some(&session), ready).await.0, 202);
    (rt, handle, session)
}

#[test]
fn a_handler_that_answers_at_once_costs_no_task_and_one_that_waits_is_spawned() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let (rt, handle, session) = start(DriverConfig::default()).await;
        let before = rt.spawned();
        let (status, _, answer) = post(&handle, Some(&session), call(1, "now")).await;
        assert_eq!((status, text(&answer)), (200, "now"), "{answer}");
        assert_eq!(rt.spawned(), before, "answered inline: no task");
        let (status, _, answer) = post(&handle, Some(&session), call(2, "later")).await;
        assert_eq!((status, text(&answer)), (200, "later"), "{answer}");
        assert_eq!(rt.spawned(), before + 1, "the waiting handler got a task");
        handle.shutdown();
    });
}

#[test]
fn with_spawn_handlers_every_handler_gets_a_task() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let (rt, handle, session) = start(DriverConfig::default().with_spawn_handlers(true)).await;
        let before = rt.spawned();
        let (status, _, answer) = post(&handle, Some(&session), call(1, "now")).await;
        assert_eq!((status, text(&answer)), (200, "now"), "{answer}");
        assert_eq!(rt.spawned(), before + 1);
        handle.shutdown();
    });
}
