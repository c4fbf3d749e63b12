//! The everything server and its client through the real transport state machines
//! (`ClientSession` ↔ `Router`, in memory, virtual clock): the scenarios of the conformance
//! server suite that involve the transport (SSE responses carrying progress, logs and
//! server→client requests; the GET stream; cancellation; polling and resumption), plus every
//! tool, resource, template and prompt, argument validation errors, and stateless mode.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::jsonrpc::error_codes;
use mcp_service::client::{RequestOptions, ServerNotification};
use mcp_service::schema::{ContentBlock, LoggingLevel, ResourceContents};
use mcp_tests::everything::{self, JSON_SCHEMA_2020_12, PNG, WAV};
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
        mcp_service::Tool::new("slow").description("Takes a minute"),
        move |ctx, _| {
            let guard = OnDrop(flag.clone());
            async move {
                let _guard = guard;
                ctx.sleep(Duration::from_secs(60)).await;
                Ok(mcp_service::CallToolResult::text("late"))
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
        mcp_service::Tool::new("new_tool").description("New"),
        |_, _| async { Ok(mcp_service::CallToolResult::text("new")) },
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

#[test]
fn every_tool_over_http() {
    let mut pair = MemoryPair::new(&everything::server(), conformance_client());
    let client = pair.client.clone();
    pair.block_on(async move {
        client.initialize().await.unwrap();
        let tools = client.list_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        for name in [
            "echo",
            "test_simple_text",
            "test_image_content",
            "test_audio_content",
            "test_embedded_resource",
            "test_multiple_content_types",
            "test_tool_with_logging",
            "test_error_handling",
            "test_tool_with_progress",
            "test_sampling",
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
            "json_schema_2020_12_tool",
            "test_reconnection",
        ] {
            assert!(names.contains(&name), "missing {name}");
        }
        let schema_tool = tools
            .iter()
            .find(|t| t.name == "json_schema_2020_12_tool")
            .unwrap();
        assert_eq!(
            serde_json::to_string(&schema_tool.input_schema).unwrap(),
            JSON_SCHEMA_2020_12,
            "kept exactly through the transport, key order included"
        );

        let r = client.call_tool("test_image_content", json!({})).await.unwrap();
        assert!(
            matches!(&r.content[..], [ContentBlock::Image(i)] if i.data == PNG && i.mime_type == "image/png")
        );
        let r = client.call_tool("test_audio_content", json!({})).await.unwrap();
        assert!(
            matches!(&r.content[..], [ContentBlock::Audio(a)] if a.data == WAV && a.mime_type == "audio/wav")
        );
        let r = client.call_tool("test_embedded_resource", json!({})).await.unwrap();
        let [ContentBlock::Resource(e)] = &r.content[..] else {
            panic!("{r:?}")
        };
        let ResourceContents::Text(t) = &e.resource else {
            panic!("{e:?}")
        };
        assert_eq!(
            (t.uri.as_str(), t.text.as_str()),
            ("test://embedded-resource", "This is an embedded resource content.")
        );
        let r = client
            .call_tool("test_multiple_content_types", json!({}))
            .await
            .unwrap();
        assert_eq!(r.content.len(), 3);
        assert_eq!(r.first_text(), Some("Multiple content types test:"));
        assert!(matches!(r.content[1], ContentBlock::Image(_)));
        let r = client.call_tool("echo", json!({"text": "héllo ✓"})).await.unwrap();
        assert_eq!(r.first_text(), Some("héllo ✓"));
        let r = client
            .call_tool(
                "json_schema_2020_12_tool",
                json!({"name": "x", "address": {"city": "y"}, "email": "x@example.com"}),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, None, "{r:?}");
        let r = client.call_tool("test_error_handling", json!({})).await.unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.first_text(),
            Some("This tool intentionally returns an error for testing")
        );
        let r = client
            .call_tool("test_elicitation_sep1034_defaults", json!({}))
            .await
            .unwrap();
        assert_eq!(
            r.first_text(),
            Some(
                r#"User response: action=accept, content={"age":30,"name":"John Doe","score":95.5,"status":"active","verified":true}"#
            )
        );
        let r = client
            .call_tool("test_elicitation_sep1330_enums", json!({}))
            .await
            .unwrap();
        assert_eq!(
            r.first_text(),
            Some("User response: action=accept, content={}")
        );
    });
    // The server→client requests rode the call's SSE stream and were answered.
    let received = pair.received();
    assert_eq!(
        received
            .iter()
            .filter(|m| **m == "elicitation/create")
            .count(),
        2,
        "{received:?}"
    );
}

#[test]
fn every_resource_template_and_prompt_over_http() {
    let server = everything::server();
    let mut pair = MemoryPair::new(&server, conformance_client());
    let client = pair.client.clone();
    let server2 = server.clone();
    let notes = pair.block_on(async move {
        client.initialize().await.unwrap();
        let list = client.list_resources().await.unwrap();
        let uris: Vec<&str> = list.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "test://static-text",
                "test://static-binary",
                "test://watched-resource",
                "skill://pdf-processing/SKILL.md",
                "skill://pdf-processing/references/FORMS.md",
                "skill://pdf-processing/scripts/extract.py"
            ]
        );
        let templates = client.list_resource_templates().await.unwrap();
        assert_eq!(templates[0].uri_template, "test://template/{id}/data");

        let r = client.read_resource("test://static-text").await.unwrap();
        let [ResourceContents::Text(t)] = &r.contents[..] else {
            panic!("{r:?}")
        };
        assert_eq!(t.text, "This is the content of the static text resource.");
        let r = client.read_resource("test://static-binary").await.unwrap();
        let [ResourceContents::Blob(b)] = &r.contents[..] else {
            panic!("{r:?}")
        };
        assert_eq!(b.blob, PNG);
        let r = client.read_resource("test://watched-resource").await.unwrap();
        assert_eq!(r.contents.len(), 1);
        let r = client
            .read_resource("test://template/123/data")
            .await
            .unwrap();
        let [ResourceContents::Text(t)] = &r.contents[..] else {
            panic!("{r:?}")
        };
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&t.text).unwrap(),
            json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"})
        );
        let err = client.read_resource("test://nope").await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::RESOURCE_NOT_FOUND));

        let prompts = client.list_prompts().await.unwrap();
        assert_eq!(prompts.len(), 5, "the four 0.1.16 prompts and test_input_required_result_prompt");
        let r = client
            .get_prompt("test_simple_prompt", [("", ""); 0])
            .await
            .unwrap();
        assert!(
            matches!(&r.messages[0].content, ContentBlock::Text(t) if t.text == "This is a simple prompt for testing.")
        );
        let r = client
            .get_prompt(
                "test_prompt_with_arguments",
                [("arg1", "testValue1"), ("arg2", "testValue2")],
            )
            .await
            .unwrap();
        assert!(matches!(&r.messages[0].content, ContentBlock::Text(t)
            if t.text == "Prompt with arguments: arg1='testValue1', arg2='testValue2'"));
        let r = client
            .get_prompt(
                "test_prompt_with_embedded_resource",
                [("resourceUri", "test://example-resource")],
            )
            .await
            .unwrap();
        let ContentBlock::Resource(e) = &r.messages[0].content else {
            panic!("{r:?}")
        };
        assert_eq!(e.resource.uri(), "test://example-resource");
        let r = client
            .get_prompt("test_prompt_with_image", [("", ""); 0])
            .await
            .unwrap();
        assert!(
            matches!(&r.messages[0].content, ContentBlock::Image(i) if i.data == PNG)
        );

        let r = client
            .complete_prompt_argument("test_prompt_with_arguments", "arg1", "test")
            .await
            .unwrap();
        assert_eq!(r.completion.values, ["testValue1", "testValue2"]);
        client.ping().await.unwrap();

        // Subscriptions: the update is not tied to a request, so it rides the GET stream.
        let notes = client.notifications();
        client.subscribe("test://watched-resource").await.unwrap();
        assert_eq!(
            server2.notify_resource_updated("test://watched-resource"),
            1
        );
        notes
    });
    pair.run_for(Duration::from_millis(10));
    let mut notes = notes;
    let got = notes.drain();
    assert!(
        matches!(&got[..], [ServerNotification::ResourceUpdated(u)] if u.uri == "test://watched-resource"),
        "{got:?}"
    );
    let client = pair.client.clone();
    pair.block_on(async move {
        client.unsubscribe("test://watched-resource").await.unwrap();
    });
    assert_eq!(server.notify_resource_updated("test://watched-resource"), 0);
}

#[test]
fn argument_validation_errors_over_http() {
    let mut pair = MemoryPair::new(&everything::server(), conformance_client());
    let client = pair.client.clone();
    pair.block_on(async move {
        client.initialize().await.unwrap();
        // Schema validation: a tool error naming the problem, not a protocol error.
        let r = client.call_tool("echo", json!({})).await.unwrap();
        assert_eq!(r.is_error, Some(true), "{r:?}");
        let text = r.first_text().unwrap();
        assert!(
            text.starts_with("Invalid arguments for tool `echo`") && text.contains("text"),
            "{text}"
        );
        let r = client.call_tool("echo", json!({"text": 5})).await.unwrap();
        assert_eq!(r.is_error, Some(true), "{r:?}");
        let r = client.call_tool("test_sampling", json!({})).await.unwrap();
        assert_eq!(r.is_error, Some(true), "{r:?}");
        // Protocol errors travel as JSON-RPC errors through the transport.
        let err = client.call_tool("nope", json!({})).await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
        let err = client
            .get_prompt("test_prompt_with_arguments", [("arg1", "x")])
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
        assert!(err.to_string().contains("arg2"), "{err}");
        let err = client.get_prompt("nope", [("", ""); 0]).await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
        // The session survives every error.
        let r = client
            .call_tool("echo", json!({"text": "ok"}))
            .await
            .unwrap();
        assert_eq!(r.first_text(), Some("ok"));
    });
}

#[test]
fn logs_and_progress_precede_the_response_on_the_wire() {
    let mut pair = MemoryPair::new(&everything::server(), conformance_client());
    let client = pair.client.clone();
    pair.block_on(async move {
        client.initialize().await.unwrap();
        client.set_level(LoggingLevel::Debug).await.unwrap();
    });
    pair.clear_trace();
    let client = pair.client.clone();
    let exec = pair.exec.clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let elapsed = pair.block_on(async move {
        let start = exec.elapsed();
        client
            .call_tool("test_tool_with_logging", json!({}))
            .await
            .unwrap();
        let options = RequestOptions::new().on_progress(move |p| {
            seen2
                .lock()
                .unwrap()
                .push((p.progress.as_u64(), p.total.and_then(|t| t.as_u64())));
        });
        client
            .call_tool_with("test_tool_with_progress", json!({}), options)
            .await
            .unwrap();
        exec.elapsed() - start
    });
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (Some(0), Some(100)),
            (Some(50), Some(100)),
            (Some(100), Some(100))
        ]
    );
    assert_eq!(elapsed, Duration::from_millis(200), "four 50 ms steps");
    // On the client's side of the wire: three logs, the first answer, three progress
    // notifications, the second answer — nothing reordered by the SSE streams.
    let order: Vec<String> = pair
        .trace()
        .iter()
        .filter_map(|t| match t {
            Trace::Received(m) => Some(m.clone()),
            Trace::Answered(_) => Some("answer".to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            "notifications/message",
            "notifications/message",
            "notifications/message",
            "answer",
            "notifications/progress",
            "notifications/progress",
            "notifications/progress",
            "answer",
        ]
    );
}

#[test]
fn stateless_mode_serves_every_request_without_a_session() {
    let mut pair = MemoryPair::connect(
        &everything::server(),
        conformance_client(),
        mcp_proto::client::ClientConfig::new(),
        mcp_proto::server::ServerConfig::default().with_stateless(true),
    );
    let client = pair.client.clone();
    pair.block_on(async move {
        client.initialize().await.unwrap();
        assert!(client.list_tools().await.unwrap().len() >= 15);
        let r = client
            .call_tool("echo", json!({"text": "hi"}))
            .await
            .unwrap();
        assert_eq!(r.first_text(), Some("hi"));
        let r = client.read_resource("test://static-text").await.unwrap();
        assert_eq!(r.contents.len(), 1);
        let r = client
            .get_prompt("test_simple_prompt", [("", ""); 0])
            .await
            .unwrap();
        assert_eq!(r.messages.len(), 1);
        let r = client
            .call_tool("test_elicitation", json!({"message": "who?"}))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true), "no back channel: {r:?}");
        client.ping().await.unwrap();
    });
    assert!(pair.session_id().is_none());
    assert!(
        !pair
            .trace()
            .iter()
            .any(|t| matches!(t, Trace::Http(m, _) if m == http::Method::GET)),
        "no GET stream in stateless mode"
    );
}
