//! Three `mcp-everything` processes on one Redis behind nginx (round robin, not sticky), on
//! both server runtimes, with our client on both runtimes:
//!
//! - the interop scenario (`mcp-interop-client`: initialize, tools/list, a tool call, a
//!   notification on the GET stream, a sampling request answered through another instance,
//!   DELETE) through the load balancer;
//! - a `notifications/cancelled` posted to one instance stops the call running on another,
//!   and a `DELETE` on one ends the session on all (raw HTTP to each instance);
//! - the fault-injection ledgers with instances killed by `SIGKILL` mid-run and restarted:
//!   the instance running a streaming call (found by the PID in its progress messages), and
//!   every instance in turn (a rolling restart) under GET-stream bursts. 0 lost, 0
//!   duplicated, 0 hung; a call a kill fell into ends with the error that says its instance
//!   stopped, after everything it had committed.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tests::cluster_procs::{ProcessCluster, get_kill_ledger, post_kill_ledger};
use mcp_tests::faults::Workload;
use mcp_tests::runtime::Runtime;

const EVERYTHING: &str = env!("CARGO_BIN_EXE_mcp-everything");
const INTEROP_CLIENT: &str = env!("CARGO_BIN_EXE_mcp-interop-client");

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn cluster(server: Runtime) -> Option<ProcessCluster> {
    match ProcessCluster::start(EVERYTHING.as_ref(), server, 3, &["--retry-ms", "300"]) {
        Ok(c) => Some(c),
        Err(e) => {
            mcp_tests::services::unavailable(&e);
            None
        }
    }
}

fn interop_scenario(server: Runtime) {
    let Some(cluster) = cluster(server) else {
        return;
    };
    for client in [Runtime::Tokio, Runtime::Smol] {
        let out = Command::new(INTEROP_CLIENT)
            .args(["--runtime", client.name(), "--everything", &cluster.url()])
            .output()
            .expect("run mcp-interop-client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{client} client → 3 {server} instances: {}\n{stdout}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            cluster.logs()
        );
        assert!(stdout.contains("sampling"), "{stdout}");
    }
}

#[test]
fn the_interop_scenario_runs_across_three_tokio_processes() {
    interop_scenario(Runtime::Tokio);
}

#[test]
fn the_interop_scenario_runs_across_three_smol_processes() {
    interop_scenario(Runtime::Smol);
}

const POST: Workload = Workload {
    rounds: 8,
    n: 100,
    interval_ms: 3,
    retry: Duration::from_millis(300),
    timeout: Duration::from_secs(30),
};

const GET: Workload = Workload {
    rounds: 6,
    n: 40,
    interval_ms: 5,
    retry: Duration::from_millis(300),
    timeout: Duration::from_secs(30),
};

fn kill_ledgers(server: Runtime, client: Runtime) {
    let Some(cluster) = cluster(server) else {
        return;
    };
    let cluster = Arc::new(Mutex::new(cluster));
    let logs = || cluster.lock().map(|c| c.logs()).unwrap_or_default();
    let rt = tokio_rt();
    let post = rt
        .block_on(post_kill_ledger(
            client,
            cluster.clone(),
            POST,
            2,
            Duration::from_millis(500),
        ))
        .unwrap_or_else(|e| panic!("{server} ← {client}: {e}\n{}", logs()));
    println!("request streams, the running instance killed ({server} ← {client}): {post}");
    assert!(
        post.died + post.ledger.interrupted == 1,
        "the killed call must end with its instance: {post}"
    );
    if let Err(e) = post.check(1) {
        panic!("{server} ← {client}: {e}\n{post}\n{}", logs());
    }
    let get = rt
        .block_on(get_kill_ledger(
            client,
            cluster.clone(),
            GET,
            Duration::from_millis(400),
            Duration::from_millis(300),
        ))
        .unwrap_or_else(|e| panic!("{server} ← {client}: {e}\n{}", logs()));
    println!("GET stream, rolling restart ({server} ← {client}): {get}");
    if let Err(e) = get.check(3) {
        panic!("{server} ← {client}: {e}\n{get}\n{}", logs());
    }
}

#[test]
fn killed_instances_cost_no_message_tokio_servers_tokio_client() {
    kill_ledgers(Runtime::Tokio, Runtime::Tokio);
}

#[test]
fn killed_instances_cost_no_message_tokio_servers_smol_client() {
    kill_ledgers(Runtime::Tokio, Runtime::Smol);
}

#[test]
fn killed_instances_cost_no_message_smol_servers_tokio_client() {
    kill_ledgers(Runtime::Smol, Runtime::Tokio);
}

#[test]
fn killed_instances_cost_no_message_smol_servers_smol_client() {
    kill_ledgers(Runtime::Smol, Runtime::Smol);
}

// ---- cancellation and deletion across processes (raw HTTP to each instance) -------------

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

async fn send(
    addr: std::net::SocketAddr,
    method: Method,
    session: Option<&str>,
    body: Option<Value>,
) -> http::Response<hyper::body::Incoming> {
    let mut req = Request::builder()
        .method(method)
        .uri("/mcp")
        .header(header::HOST, addr.to_string())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .header("MCP-Protocol-Version", "2025-11-25");
    if let Some(id) = session {
        req = req.header("Mcp-Session-Id", id);
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    mcp_tests::raw::exchange(addr, req).await
}

/// Reads `body` until `needle` appears (`true`) or the body ends (`false`), within `WAIT`.
async fn read_until(body: &mut hyper::body::Incoming, needle: &str, seen: &mut String) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !seen.contains(needle) {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => panic!("neither {needle:?} nor the end within {WAIT:?}: {seen}"),
            Ok(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    seen.push_str(&String::from_utf8_lossy(d));
                }
            }
            Ok(_) => return false,
        }
    }
    true
}

/// A 2025-11-25 session with `capabilities`: initialized on `first`, `notifications/initialized`
/// on `second`. Returns its id.
async fn open_session(
    first: std::net::SocketAddr,
    second: std::net::SocketAddr,
    capabilities: Value,
) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "cluster-processes", "version": "1"}}});
    let resp = send(first, Method::POST, None, Some(init)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .expect("session id")
        .to_owned();
    let _ = resp.into_body().collect().await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = send(second, Method::POST, Some(&id), Some(note)).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    id
}

fn cancel_and_delete_across_processes(server: Runtime) {
    let Some(cluster) = cluster(server) else {
        return;
    };
    let [a, b, c] = [0, 1, 2].map(|i| cluster.instance_addr(i));
    tokio_rt().block_on(async {
        let id = open_session(a, b, json!({})).await;
        // A long call on B (10 s of progress), cancelled through C.
        let long = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "ledger_count", "arguments": {"n": 500, "interval_ms": 20},
            "_meta": {"progressToken": "long"}}});
        let resp = send(b, Method::POST, Some(&id), Some(long)).await;
        assert_eq!(resp.status(), StatusCode::OK, "{server}");
        let mut stream = resp.into_body();
        let mut seen = String::new();
        assert!(read_until(&mut stream, "notifications/progress", &mut seen).await);
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "the user gave up"}});
        let resp = send(c, Method::POST, Some(&id), Some(cancel)).await;
        assert_eq!(resp.status(), StatusCode::ACCEPTED, "{server}");
        // The handler on B stops: its stream ends long before its 10 s, with no result.
        let ended = !read_until(&mut stream, "counted 500", &mut seen).await;
        assert!(ended, "{server}: the cancelled call answered: {seen}");
        let progress = seen.matches("notifications/progress").count();
        assert!(
            progress < 400,
            "{server}: {progress} progress events: not stopped"
        );
        // DELETE through C: gone on A and B at once.
        let resp = send(c, Method::DELETE, Some(&id), None).await;
        assert_eq!(resp.status(), StatusCode::OK, "{server}");
        for addr in [a, b, c] {
            let echo = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}}});
            let resp = send(addr, Method::POST, Some(&id), Some(echo)).await;
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{server}: {addr}");
        }
    });
}

#[test]
fn a_cancellation_and_a_delete_cross_tokio_processes() {
    cancel_and_delete_across_processes(Runtime::Tokio);
}

#[test]
fn a_cancellation_and_a_delete_cross_smol_processes() {
    cancel_and_delete_across_processes(Runtime::Smol);
}

// ---- tasks across processes (the Tasks extension on Redis; raw HTTP to each instance) ----

/// The JSON-RPC result of a POST (a JSON answer, or the one message of an SSE answer).
async fn result_of(resp: http::Response<hyper::body::Incoming>) -> Value {
    let body = resp.into_body().collect().await.expect("a body").to_bytes();
    let text = String::from_utf8_lossy(&body);
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap_or(&text)
        .trim()
        .to_owned();
    let message: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {text}"));
    message
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("no result: {message}"))
}

async fn call(
    addr: std::net::SocketAddr,
    session: &str,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let resp = send(addr, Method::POST, Some(session), Some(body)).await;
    assert_eq!(resp.status(), StatusCode::OK, "{method} on {addr}");
    result_of(resp).await
}

/// Polls task `task` on `addr` until its status is `want` (then its `tasks/get` result),
/// within `within`.
async fn poll_until(
    addr: std::net::SocketAddr,
    session: &str,
    task: &str,
    want: &str,
    within: Duration,
) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    let mut n = 1000;
    loop {
        n += 1;
        let got = call(addr, session, n, "tasks/get", json!({"taskId": task})).await;
        if got["status"] == want {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task} on {addr} not {want} within {within:?}: {got}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn tasks_across_processes(server: Runtime) {
    let Some(mut cluster) = cluster(server) else {
        return;
    };
    let [a, b, c] = [0, 1, 2].map(|i| cluster.instance_addr(i));
    let rt = tokio_rt();
    let (id, doomed) = rt.block_on(async {
        let capabilities = json!({"elicitation": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}}});
        let id = open_session(a, b, capabilities).await;

        // Created on A; polled on B and C; its result fetched on C.
        let created = call(
            a,
            &id,
            2,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "x"}}),
        )
        .await;
        assert_eq!(created["resultType"], "task", "{server}: {created}");
        let task = created["taskId"].as_str().expect("a task id").to_owned();
        let got = call(b, &id, 3, "tasks/get", json!({"taskId": task})).await;
        assert_eq!(got["status"], "working", "{server}: {got}");
        let done = poll_until(c, &id, &task, "completed", WAIT).await;
        assert_eq!(
            done["result"]["content"][0]["text"], "Computed x in 1s",
            "{server}: {done}"
        );

        // Run on B, it asks: listed on C, answered on A, its result read on C.
        let created = call(
            b,
            &id,
            4,
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}}),
        )
        .await;
        let task = created["taskId"].as_str().expect("a task id").to_owned();
        let asked = poll_until(c, &id, &task, "input_required", WAIT).await;
        let keys: Vec<&String> = asked["inputRequests"]
            .as_object()
            .expect("inputRequests")
            .keys()
            .collect();
        assert_eq!(keys.len(), 1, "{server}: {asked}");
        let answer = json!({"taskId": task, "inputResponses": {
            keys[0].as_str(): {"action": "accept", "content": {"confirm": true}}}});
        call(a, &id, 5, "tasks/update", answer).await;
        let done = poll_until(c, &id, &task, "completed", WAIT).await;
        let text = done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(text.starts_with("a.txt"), "{server}: {done}");

        // Run on C for an hour, cancelled on A: cancelled everywhere.
        let created = call(
            c,
            &id,
            6,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 3600}}),
        )
        .await;
        let task = created["taskId"].as_str().expect("a task id").to_owned();
        call(a, &id, 7, "tasks/cancel", json!({"taskId": task})).await;
        for addr in [a, b, c] {
            let got = call(addr, &id, 8, "tasks/get", json!({"taskId": task})).await;
            assert_eq!(got["status"], "cancelled", "{server}: {addr}: {got}");
        }

        // Run on B for an hour; B is killed below.
        let created = call(
            b,
            &id,
            9,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 3600}}),
        )
        .await;
        let doomed = created["taskId"].as_str().expect("a task id").to_owned();
        let got = call(c, &id, 10, "tasks/get", json!({"taskId": doomed})).await;
        assert_eq!(got["status"], "working", "{server}: {got}");
        (id, doomed)
    });
    cluster.kill(1);
    rt.block_on(async {
        // Failed, with the error that says why, once: every instance then reports the same.
        let failed = poll_until(a, &id, &doomed, "failed", Duration::from_secs(30)).await;
        assert_eq!(failed["error"]["code"], -32603, "{server}: {failed}");
        let message = failed["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("stopped"), "{server}: {failed}");
        let again = call(c, &id, 11, "tasks/get", json!({"taskId": doomed})).await;
        assert_eq!(again, failed, "{server}: reported twice differently");
    });
}

#[test]
fn tasks_cross_tokio_processes_and_survive_a_killed_instance() {
    tasks_across_processes(Runtime::Tokio);
}

#[test]
fn tasks_cross_smol_processes_and_survive_a_killed_instance() {
    tasks_across_processes(Runtime::Smol);
}
