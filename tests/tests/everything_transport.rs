//! The everything server and its client through the real transport state machines
//! (`ClientSession` ↔ `Router`, in memory, virtual clock): the scenarios of the conformance
//! server suite that involve the transport (SSE responses carrying progress, logs and
//! server→client requests; the GET stream; cancellation; polling and resumption).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::schema::LoggingLevel;
use mcp_proto::service::client::{RequestOptions, ServerNotification};
use mcp_tests::everything;
use mcp_tests::harness::{SAMPLING_ANSWER, conformance_client};
use mcp_tests::pair::{MemoryPair, Trace};
use serde_json::json;

#[test]
fn initialize_list_and_call_over_http() {
    let mut pair = MemoryPair::new(&everything::server(), conformance_client());
    let client = pair.client.clone();
    let (init, tools, text) = pair.block_on(async move {
        let init = client.initialize().await.unwrap();
        let tools = client.list_tools().await.unwrap();
        let text = client.call_tool("test_simple_text", ()).await.unwrap();
        (init, tools, text)
    });
    assert_eq!(init.protocol_version, "2025-11-25");
    assert!(tools.len() >= 15);
    assert_eq!(
        text.first_text(),
        Some("This is a simple text response for testing.")
    );
    assert!(
        pair.session_id().is_some(),
        "the router issued a session id"
    );
    let posts = pair
        .trace()
        .iter()
        .filter(|t| matches!(t, Trace::Http(m, _) if m == http::Method::POST))
        .count();
    assert!(posts >= 4, "{:?}", pair.trace());
    assert!(
        pair.trace()
            .iter()
            .any(|t| matches!(t, Trace::Http(m, _) if m == http::Method::GET)),
        "a GET stream opened"
    );
}

#[test]
fn progress_logging_sampling_elicitation_over_http() {
    let mut pair = MemoryPair::new(&everything::server(), conformance_client());
    let client = pair.client.clone();
    let progress = Arc::new(Mutex::new(Vec::new()));
    let p2 = progress.clone();
    let exec = pair.exec.clone();
    let (logs, sampled, elicited, elapsed) = pair.block_on(async move {
        client.initialize().await.unwrap();
        client.set_level(LoggingLevel::Debug).await.unwrap();
        let mut notes = client.notifications();
        let start = exec.elapsed();
        client
            .call_tool("test_tool_with_logging", json!({}))
            .await
            .unwrap();
        let logs = notes.drain();
        let options = RequestOptions::new()
            .on_progress(move |p| p2.lock().unwrap().push(p.progress.as_u64()));
        let r = client
            .call_tool_with("test_tool_with_progress", json!({}), options)
            .await
            .unwrap();
        assert_eq!(r.is_error, None);
        let sampled = client
            .call_tool("test_sampling", json!({"prompt": "hi"}))
            .await
            .unwrap();
        let elicited = client
            .call_tool("test_elicitation", json!({"message": "who?"}))
            .await
            .unwrap();
        (logs, sampled, elicited, exec.elapsed() - start)
    });
    let texts: Vec<_> = logs
        .iter()
        .filter_map(|n| match n {
            ServerNotification::Log(l) => l.data.as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );
    assert_eq!(*progress.lock().unwrap(), [Some(0), Some(50), Some(100)]);
    assert_eq!(
        sampled.first_text(),
        Some(format!("LLM response: {SAMPLING_ANSWER}").as_str())
    );
    assert!(
        elicited
            .first_text()
            .unwrap()
            .starts_with("User response: action=accept"),
        "{elicited:?}"
    );
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
}

#[test]
fn reconnection_polling_resumes_and_delivers_the_result() {
    let mut pair = MemoryPair::new(&everything::server(), conformance_client());
    let client = pair.client.clone();
    let r = pair.block_on(async move {
        client.initialize().await.unwrap();
        client
            .call_tool("test_reconnection", json!({}))
            .await
            .unwrap()
    });
    assert_eq!(r.first_text(), Some("Reconnection test completed"));
    let trace = pair.trace();
    assert!(
        trace.iter().any(|t| matches!(
            t,
            Trace::Server(mcp_proto::server::ServerEvent::ClosedForPolling { .. })
        )),
        "{trace:?}"
    );
    assert!(
        trace.iter().any(|t| matches!(
            t,
            Trace::Http(_, mcp_proto::client::HttpRequestKind::Resume)
        )),
        "the client resumed with GET and Last-Event-ID: {trace:?}"
    );
}

#[test]
fn dropping_a_call_cancels_the_handler_over_http() {
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = dropped.clone();
    struct OnDrop(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let server = everything::server().tool(
        mcp_proto::service::Tool::new("slow").description("Takes a minute"),
        move |ctx, _| {
            let guard = OnDrop(flag.clone());
            async move {
                let _guard = guard;
                ctx.sleep(Duration::from_secs(60)).await;
                Ok(mcp_proto::service::CallToolResult::text("late"))
            }
        },
    );
    let mut pair = MemoryPair::new(&server, conformance_client());
    let client = pair.client.clone();
    let exec = pair.exec.clone();
    let outcome = pair.block_on(async move {
        client.initialize().await.unwrap();
        mcp_tests::harness::timeout(
            &exec,
            Duration::from_millis(100),
            client.call_tool("slow", ()),
        )
        .await
    });
    assert!(outcome.is_none());
    pair.run_for(Duration::from_secs(1));
    assert!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        "the server dropped the handler"
    );
    assert!(pair.server_sessions().iter().all(|s| s.in_flight() == 0));
    assert_eq!(pair.client.pending(), 0);
}

#[test]
fn list_changed_reaches_the_client_on_the_get_stream() {
    let server = everything::server();
    let mut pair = MemoryPair::new(&server, conformance_client());
    let client = pair.client.clone();
    let notes = pair.block_on(async move {
        client.initialize().await.unwrap();
        client.notifications()
    });
    pair.run_for(Duration::from_millis(10));
    server.add_tool(
        mcp_proto::service::Tool::new("new_tool").description("New"),
        |_, _| async { Ok(mcp_proto::service::CallToolResult::text("new")) },
    );
    assert!(server.notify_resource_updated("test://watched-resource") == 0);
    pair.run_for(Duration::from_millis(10));
    let mut notes = notes;
    assert_eq!(notes.drain(), [ServerNotification::ToolListChanged]);
}

#[test]
fn stateless_mode_has_no_back_channel_for_sampling() {
    let mut pair = MemoryPair::connect(
        &everything::server(),
        conformance_client(),
        mcp_proto::client::ClientConfig::new(),
        mcp_proto::server::ServerConfig::default().with_stateless(true),
    );
    let client = pair.client.clone();
    let (sampled, progress) = pair.block_on(async move {
        client.initialize().await.unwrap();
        let sampled = client
            .call_tool("test_sampling", json!({"prompt": "x"}))
            .await
            .unwrap();
        let seen = Arc::new(Mutex::new(0));
        let s2 = seen.clone();
        let options = RequestOptions::new().on_progress(move |_| *s2.lock().unwrap() += 1);
        client
            .call_tool_with("test_tool_with_progress", json!({}), options)
            .await
            .unwrap();
        let n = *seen.lock().unwrap();
        (sampled, n)
    });
    assert_eq!(sampled.is_error, Some(true));
    assert!(
        sampled.first_text().unwrap().contains("back channel"),
        "{sampled:?}"
    );
    assert_eq!(
        progress, 3,
        "related notifications still ride the request's own stream"
    );
    assert!(pair.session_id().is_none());
}
