//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) end to end: our client
//! against our server.
//!
//! - `loopback_*`: over loopback for every (client runtime, server runtime) pair and both
//!   eras (2026-07-28, where capabilities travel in each request's `_meta`, and 2025-11-25,
//!   where the client declares the extension at `initialize`), against the everything
//!   server's task fixtures: a call waited for transparently, a task polled and cancelled, a
//!   task that needs input answered by the client's elicitation handler, tool and protocol
//!   errors, the MRTR round before a task, and a client without the extension (sync
//!   fallback, `-32021` for a tool that requires tasks).
//! - `the_client_polls_at_the_servers_interval`: on the in-memory pair's virtual clock, a
//!   10 s task with a 2 s poll interval is polled about five times, not in a loop; and a
//!   server asking for 1 ms is held to the client's 100 ms floor.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_proto::client::{ClientConfig, EraMode};
use mcp_proto::server::ServerConfig;
use mcp_service::client::{RequestError, ToolCall};
use mcp_service::schema::TaskStatus;
use mcp_service::{CallToolResult, Server, TaskConfig, Tool, ToolArgs};
use mcp_tests::everything;
use mcp_tests::harness::conformance_client;
use mcp_tests::pair::MemoryPair;
use mcp_tests::runtime::Runtime;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(30);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

fn text(r: &CallToolResult) -> String {
    r.first_text().unwrap_or_default().to_owned()
}

async fn scenario(mode: EraMode, client_rt: Runtime, server_rt: Runtime) {
    let serving = bounded(
        "serve",
        server_rt.serve(everything::server(), ServerConfig::default()),
    )
    .await
    .expect("serve");
    let config = || ClientConfig::new().with_era(mode);
    let client = client_rt
        .start(serving.url(), conformance_client().tasks(), config())
        .expect("start");
    bounded("initialize", client.initialize())
        .await
        .expect("initialize");

    // A call that became a task is waited for: the caller sees the result.
    let r = bounded(
        "slow_compute",
        client.call_tool("slow_compute", json!({"seconds": 0.2, "label": "a"})),
    )
    .await
    .expect("[transparent] slow_compute");
    assert_eq!(text(&r), "Computed a in 0.2s", "[transparent]");

    // The lifecycle shown: a task, polled, cancelled.
    let call = bounded(
        "start",
        client.start_tool("slow_compute", json!({"seconds": 60})),
    )
    .await
    .expect("[cancel] start");
    let ToolCall::Task(mut task) = call else {
        panic!("[cancel] a task-supporting tool answered a client that takes tasks at once");
    };
    assert!(!task.id().is_empty());
    let got = bounded("get", task.get()).await.expect("[cancel] get");
    assert_eq!(got.task.status, TaskStatus::Working, "[cancel]");
    bounded("cancel", task.cancel())
        .await
        .expect("[cancel] cancel");
    let ended = bounded("wait", task.wait()).await;
    assert!(
        matches!(ended, Err(RequestError::TaskCancelled(_))),
        "[cancel] {ended:?}"
    );
    // A cancel after the end is acknowledged too; the status stays.
    bounded("cancel again", task.cancel())
        .await
        .expect("[cancel] idempotent");
    assert_eq!(
        bounded("get", task.get()).await.unwrap().task.status,
        TaskStatus::Cancelled
    );

    // A task that needs input: the client's elicitation handler answers it.
    let call = bounded(
        "confirm_delete",
        client.start_tool("confirm_delete", json!({"filename": "x.txt"})),
    )
    .await
    .expect("[input] start");
    let ToolCall::Task(mut task) = call else {
        panic!("[input] not a task")
    };
    let r = bounded("wait", task.wait()).await.expect("[input] wait");
    assert!(
        text(&r).starts_with("x.txt: action=accept"),
        "[input] {}",
        text(&r)
    );

    // A tool error completes the task; a JSON-RPC error fails it.
    let r = bounded("failing_job", client.call_tool("failing_job", json!({})))
        .await
        .expect("[tool error]");
    assert_eq!(r.is_error, Some(true), "[tool error]");
    let e = bounded(
        "protocol_error_job",
        client.call_tool("protocol_error_job", json!({})),
    )
    .await
    .expect_err("[failed]");
    assert_eq!(e.code(), Some(-32603), "[failed] {e}");

    // Input first (an MRTR round, or a server request in 2025-11-25), then a task.
    let r = bounded(
        "test_tool_with_task",
        client.call_tool("test_tool_with_task", json!({})),
    )
    .await
    .expect("[mrtr then task]");
    assert!(
        text(&r).starts_with("Hello, "),
        "[mrtr then task] {}",
        text(&r)
    );

    // An unknown task: -32602.
    let e = bounded("unknown", client.resume_task("no-such-task").get())
        .await
        .expect_err("[unknown]");
    assert_eq!(e.code(), Some(-32602), "[unknown] {e}");

    // A client without the extension: a task-supporting tool answers at once, a tool that
    // requires tasks is refused with -32021, and the task methods too.
    let plain = client_rt
        .start(serving.url(), conformance_client(), config())
        .expect("start plain");
    bounded("initialize", plain.initialize())
        .await
        .expect("initialize plain");
    let r = bounded(
        "plain call",
        plain.start_tool("slow_compute", json!({"seconds": 0})),
    )
    .await
    .expect("[plain]");
    assert!(matches!(r, ToolCall::Done(_)), "[plain] {r:?}");
    let e = bounded("plain required", plain.call_tool("failing_job", json!({})))
        .await
        .expect_err("[plain required]");
    assert_eq!(e.code(), Some(-32021), "[plain required] {e}");
    let e = bounded("plain get", plain.resume_task("x").get())
        .await
        .expect_err("[plain get]");
    assert_eq!(e.code(), Some(-32021), "[plain get] {e}");
}

macro_rules! matrix {
    ($($name:ident: $mode:ident, $client:ident, $server:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                scenario(EraMode::$mode, Runtime::$client, Runtime::$server).await
            }
        )*
    };
}

matrix! {
    loopback_modern_tokio_to_tokio: Modern, Tokio, Tokio;
    loopback_modern_tokio_to_smol: Modern, Tokio, Smol;
    loopback_modern_smol_to_tokio: Modern, Smol, Tokio;
    loopback_modern_smol_to_smol: Modern, Smol, Smol;
    loopback_legacy_tokio_to_tokio: Legacy, Tokio, Tokio;
    loopback_legacy_smol_to_smol: Legacy, Smol, Smol;
}

#[test]
fn the_client_polls_at_the_servers_interval() {
    for (asked, work, expected) in [
        // 2 s asked, 10 s of work: a poll at the start and about one every 2 s.
        (Duration::from_secs(2), Duration::from_secs(10), 5..=7),
        // 1 ms asked: held to the client's 100 ms floor (2 s of work: ≈ 20 polls, not 2000).
        (Duration::from_millis(1), Duration::from_secs(2), 19..=23),
    ] {
        let server = Server::new("tasks", "1")
            .tasks(TaskConfig {
                poll_interval: asked,
                ..TaskConfig::default()
            })
            .task_tool(Tool::new("work"), move |ctx, _args: ToolArgs| async move {
                ctx.sleep(work).await;
                Ok(CallToolResult::text("done"))
            });
        let gets = Arc::new(AtomicUsize::new(0));
        let seen = gets.clone();
        let config = ClientConfig::new()
            .with_era(EraMode::Modern)
            .with_header_fn(move |ctx, _| {
                if ctx.rpc_method == Some("tasks/get") {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            });
        let mut pair = MemoryPair::connect(
            &server,
            mcp_service::client::Client::builder("c", "1").tasks(),
            config,
            ServerConfig::default(),
        );
        let client = pair.client.clone();
        let r = pair.block_on(async move {
            client.initialize().await.expect("initialize");
            client.call_tool("work", json!({})).await
        });
        assert_eq!(text(&r.expect("the task's result")), "done");
        let n = gets.load(Ordering::SeqCst);
        assert!(
            expected.contains(&n),
            "{n} polls for {work:?} at {asked:?} asked"
        );
    }
}

#[test]
fn a_task_past_its_ttl_is_gone_and_its_work_stopped() {
    // The tasks' clock is the pair's virtual one (set once the pair exists).
    let exec: Arc<std::sync::OnceLock<mcp_tests::exec::Executor>> = Arc::default();
    let clock = exec.clone();
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = stopped.clone();
    let server = Server::new("tasks", "1")
        .tasks(TaskConfig {
            ttl: Some(Duration::from_secs(5)),
            clock: Arc::new(move || {
                let now = clock.get().expect("the pair's clock").now();
                (
                    now,
                    std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
                )
            }),
            ..TaskConfig::default()
        })
        .task_tool(Tool::new("forever"), move |_ctx, _args: ToolArgs| {
            let seen = seen.clone();
            async move {
                // Dropped when the task goes: the guard tells.
                struct Stopped(Arc<std::sync::atomic::AtomicBool>);
                impl Drop for Stopped {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::SeqCst);
                    }
                }
                let _guard = Stopped(seen);
                std::future::pending::<()>().await;
                Ok(CallToolResult::text("never"))
            }
        });
    let mut pair = MemoryPair::connect(
        &server,
        mcp_service::client::Client::builder("c", "1").tasks(),
        ClientConfig::new().with_era(EraMode::Modern),
        ServerConfig::default(),
    );
    let _ = exec.set(pair.executor());
    let client = pair.client.clone();
    let mut task = pair.block_on(async move {
        client.initialize().await.expect("initialize");
        match client
            .start_tool("forever", json!({}))
            .await
            .expect("start")
        {
            ToolCall::Task(task) => task,
            ToolCall::Done(r) => panic!("not a task: {r:?}"),
        }
    });
    let created = task.last().expect("created").task.clone();
    assert_eq!(created.ttl_ms, Some(5_000));
    assert_eq!(created.created_at, "2027-01-15T08:00:00.000Z");
    let mut probe = task.clone();
    let got = pair.block_on(async move { probe.get().await });
    assert_eq!(
        got.expect("within its TTL").task.status,
        TaskStatus::Working
    );
    assert!(!stopped.load(Ordering::SeqCst));
    // The TTL's timer stops the work on time, before any further request.
    pair.run_for(Duration::from_secs(6));
    assert!(
        stopped.load(Ordering::SeqCst),
        "the expired task's work was stopped"
    );
    let gone = pair.block_on(async move { task.get().await });
    assert_eq!(gone.expect_err("past its TTL").code(), Some(-32602));
}

/// A transport that cannot run work in the background (the loopback's peer has no spawner):
/// the call fails with a clear error, and the task it could not start is not kept (two such
/// calls under a bound of one task are refused for the spawner, not for the bound).
#[test]
fn without_a_spawner_a_task_is_refused_and_not_kept() {
    let server = Server::new("tasks", "1")
        .tasks(TaskConfig {
            max_tasks: 1,
            ..TaskConfig::default()
        })
        .task_tool(Tool::new("work"), |_ctx, _args: ToolArgs| async move {
            Ok(CallToolResult::text("done"))
        });
    let (exec, lb) = mcp_tests::harness::pair(&server, conformance_client().tasks());
    let client = lb.client.clone();
    let errors = exec.block_on(async move {
        client.initialize().await.expect("initialize");
        let mut errors = Vec::new();
        for _ in 0..2 {
            errors.push(
                client
                    .start_tool("work", json!({}))
                    .await
                    .expect_err("refused"),
            );
        }
        errors
    });
    for e in errors {
        assert_eq!(e.code(), Some(-32603), "{e}");
        assert!(e.to_string().contains("cannot run a task here"), "{e}");
    }
}

/// A task answered to a client that did not declare the extension is an invalid response,
/// said as such (the extension: such a client must treat it so).
#[test]
fn a_task_for_a_client_without_the_extension_is_malformed() {
    use mcp_proto::jsonrpc::{Message, RequestId, Response};
    use mcp_service::client::ClientTransport;
    struct Sink;
    impl ClientTransport for Sink {
        fn send(&self, _: Message) -> Result<(), mcp_service::PeerError> {
            Ok(())
        }
    }
    let exec = mcp_tests::exec::Executor::new();
    let client = mcp_service::client::Client::builder("c", "1").build(Arc::new(Sink));
    let out = Arc::new(std::sync::Mutex::new(None));
    let (c2, o2) = (client.clone(), out.clone());
    exec.spawn(async move {
        *o2.lock().unwrap() = Some(c2.call_tool("t", json!({})).await);
    });
    exec.run_ready();
    let task = json!({"resultType": "task", "taskId": "t1", "status": "working",
        "createdAt": "2026-12-06T10:00:00Z", "lastUpdatedAt": "2026-12-06T10:00:00Z", "ttlMs": 1000});
    let raw = serde_json::value::to_raw_value(&task).unwrap();
    client.handle_message(Message::Response(Response::result(
        RequestId::Number(1),
        raw,
    )));
    exec.run_ready();
    let got = out.lock().unwrap().take().expect("answered");
    match got {
        Err(RequestError::Malformed(m)) => assert!(m.contains("did not declare the Tasks"), "{m}"),
        other => panic!("{other:?}"),
    }
}
