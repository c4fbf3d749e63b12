//! Every tool of the everything server, end to end over the in-memory pair: content, errors,
//! progress and log ordering and timing, sampling and elicitation round trips, and the
//! JSON Schema 2020-12 tool's schema kept exactly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_service::client::{RequestOptions, ServerNotification};
use mcp_service::schema::{ContentBlock, LoggingLevel, ResourceContents};
use mcp_tests::everything::{self, JSON_SCHEMA_2020_12, PNG, WAV};
use mcp_tests::harness::{SAMPLING_ANSWER, conformance_client, pair};
use mcp_tests::loopback::Direction;
use serde_json::json;

#[test]
fn tools_list_has_every_tool_with_a_description() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let tools = exec.block_on(async move {
        client.initialize().await.unwrap();
        client.list_tools().await.unwrap()
    });
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
        "test_notify_session",
    ] {
        assert!(names.contains(&name), "missing {name}");
    }
    for tool in &tools {
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{}",
            tool.name
        );
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
    }
    let schema_tool = tools
        .iter()
        .find(|t| t.name == "json_schema_2020_12_tool")
        .unwrap();
    assert_eq!(
        serde_json::to_string(&schema_tool.input_schema).unwrap(),
        JSON_SCHEMA_2020_12,
        "kept exactly, key order included"
    );
    let sampling = tools.iter().find(|t| t.name == "test_sampling").unwrap();
    assert_eq!(sampling.input_schema["required"], json!(["prompt"]));
}

#[test]
fn content_tools() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();

        // Called without an `arguments` member at all.
        let r = client.call_tool("test_simple_text", ()).await.unwrap();
        assert_eq!(r.first_text(), Some("This is a simple text response for testing."));
        assert_eq!(r.is_error, None);

        let r = client.call_tool("test_image_content", json!({})).await.unwrap();
        assert!(matches!(&r.content[..], [ContentBlock::Image(i)] if i.data == PNG && i.mime_type == "image/png"));

        let r = client.call_tool("test_audio_content", json!({})).await.unwrap();
        assert!(matches!(&r.content[..], [ContentBlock::Audio(a)] if a.data == WAV && a.mime_type == "audio/wav"));

        let r = client.call_tool("test_embedded_resource", json!({})).await.unwrap();
        let [ContentBlock::Resource(e)] = &r.content[..] else { panic!("{r:?}") };
        let ResourceContents::Text(t) = &e.resource else { panic!("{e:?}") };
        assert_eq!(
            (t.uri.as_str(), t.mime_type.as_deref(), t.text.as_str()),
            ("test://embedded-resource", Some("text/plain"), "This is an embedded resource content.")
        );

        let r = client.call_tool("test_multiple_content_types", json!({})).await.unwrap();
        assert_eq!(r.content.len(), 3);
        assert_eq!(r.first_text(), Some("Multiple content types test:"));
        assert!(matches!(r.content[1], ContentBlock::Image(_)));
        let ContentBlock::Resource(e) = &r.content[2] else { panic!() };
        assert_eq!(e.resource.uri(), "test://mixed-content-resource");

        let r = client.call_tool("echo", json!({"text": "hello"})).await.unwrap();
        assert_eq!(r.first_text(), Some("hello"));

        let r = client
            .call_tool("json_schema_2020_12_tool", json!({"name": "x", "address": {"city": "y"}, "email": "x@example.com"}))
            .await
            .unwrap();
        assert_eq!(r.is_error, None, "{r:?}");
    });
}

#[test]
fn error_handling_is_a_tool_result_not_a_protocol_error() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let r = client
            .call_tool("test_error_handling", json!({}))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.first_text(),
            Some("This tool intentionally returns an error for testing")
        );
    });
}

#[test]
fn logging_honours_the_level_and_precedes_the_result() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let exec2 = exec.clone();
    let (logs, elapsed) = exec.block_on(async move {
        client.initialize().await.unwrap();
        client.set_level(LoggingLevel::Debug).await.unwrap();
        let mut notes = client.notifications();
        let start = exec2.elapsed();
        let r = client
            .call_tool("test_tool_with_logging", json!({}))
            .await
            .unwrap();
        assert_eq!(r.is_error, None);
        (notes.drain(), exec2.elapsed() - start)
    });
    let texts: Vec<String> = logs
        .iter()
        .filter_map(|n| match n {
            ServerNotification::Log(l) => {
                assert_eq!(l.level, LoggingLevel::Info);
                l.data.as_str().map(str::to_owned)
            }
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
    assert_eq!(elapsed, Duration::from_millis(100), "two 50 ms steps");
    // On the wire, every log message precedes the response.
    let wire = lb.wire.summary(Direction::ToClient);
    let last_log = wire
        .iter()
        .rposition(|m| m == "notifications/message")
        .unwrap();
    let response = wire
        .iter()
        .rposition(|m| m.starts_with("response"))
        .unwrap();
    assert!(last_log < response, "{wire:?}");

    // Above the tool's level, nothing is sent.
    let client = lb.client.clone();
    let logs = exec.block_on(async move {
        client.set_level(LoggingLevel::Warning).await.unwrap();
        let mut notes = client.notifications();
        client
            .call_tool("test_tool_with_logging", json!({}))
            .await
            .unwrap();
        notes.drain()
    });
    assert!(
        logs.iter()
            .all(|n| !matches!(n, ServerNotification::Log(_))),
        "{logs:?}"
    );
}

#[test]
fn progress_is_non_decreasing_and_arrives_before_the_result() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let exec2 = exec.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let options = RequestOptions::new().on_progress(move |p| {
            seen2.lock().unwrap().push((
                p.progress.as_u64(),
                p.total.and_then(|t| t.as_u64()),
                exec2.elapsed(),
            ));
        });
        let r = client
            .call_tool_with("test_tool_with_progress", json!({}), options)
            .await
            .unwrap();
        assert_eq!(r.is_error, None);
    });
    let ms = Duration::from_millis;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (Some(0), Some(100), ms(0)),
            (Some(50), Some(100), ms(50)),
            (Some(100), Some(100), ms(100))
        ]
    );
    // The token is the call's; without a callback, no token and no progress.
    let client = lb.client.clone();
    let notes = exec.block_on(async move {
        let mut notes = client.notifications();
        client
            .call_tool("test_tool_with_progress", json!({}))
            .await
            .unwrap();
        notes.drain()
    });
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn sampling_round_trip() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let r = exec.block_on(async move {
        client.initialize().await.unwrap();
        client
            .call_tool("test_sampling", json!({"prompt": "What is 2+2?"}))
            .await
            .unwrap()
    });
    assert_eq!(
        r.first_text(),
        Some(format!("LLM response: {SAMPLING_ANSWER}").as_str())
    );
    // The server's request carried the prompt and maxTokens 100.
    let sent = lb
        .wire
        .messages()
        .into_iter()
        .find_map(|(d, m)| match m {
            mcp_proto::jsonrpc::Message::Request(r) if d == Direction::ToClient => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!(&*sent.method, "sampling/createMessage");
    let params: serde_json::Value = serde_json::from_str(sent.params.unwrap().get()).unwrap();
    assert_eq!(
        params,
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "What is 2+2?"}}], "maxTokens": 100})
    );
    assert_eq!(lb.server_requests_pending(), 0);
}

#[test]
fn elicitation_round_trips() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let (plain, defaults, enums) = exec.block_on(async move {
        client.initialize().await.unwrap();
        let plain = client
            .call_tool("test_elicitation", json!({"message": "Who are you?"}))
            .await
            .unwrap();
        let defaults = client
            .call_tool("test_elicitation_sep1034_defaults", json!({}))
            .await
            .unwrap();
        let enums = client
            .call_tool("test_elicitation_sep1330_enums", json!({}))
            .await
            .unwrap();
        (plain, defaults, enums)
    });
    assert_eq!(
        plain.first_text(),
        Some(
            r#"User response: action=accept, content={"email":"test@example.com","username":"testuser"}"#
        )
    );
    assert_eq!(
        defaults.first_text(),
        Some(
            r#"User response: action=accept, content={"age":30,"name":"John Doe","score":95.5,"status":"active","verified":true}"#
        )
    );
    assert_eq!(
        enums.first_text(),
        Some("User response: action=accept, content={}")
    );

    // The schemas on the wire have the exact shapes the suite checks.
    let requests: Vec<serde_json::Value> = lb
        .wire
        .messages()
        .into_iter()
        .filter_map(|(_, m)| match m {
            mcp_proto::jsonrpc::Message::Request(r) if &*r.method == "elicitation/create" => {
                Some(serde_json::from_str(r.params.unwrap().get()).unwrap())
            }
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["message"], "Who are you?");
    assert_eq!(
        requests[0]["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    let p = &requests[1]["requestedSchema"]["properties"];
    assert_eq!(p["name"], json!({"type": "string", "default": "John Doe"}));
    assert_eq!(p["age"], json!({"type": "integer", "default": 30}));
    assert_eq!(p["score"], json!({"type": "number", "default": 95.5}));
    assert_eq!(
        p["status"]["enum"],
        json!(["active", "inactive", "pending"])
    );
    assert_eq!(p["verified"], json!({"type": "boolean", "default": true}));
    let p = &requests[2]["requestedSchema"]["properties"];
    assert!(p["untitledSingle"].get("oneOf").is_none() && p["untitledSingle"]["enum"].is_array());
    assert!(p["titledSingle"].get("enum").is_none());
    assert_eq!(
        p["titledSingle"]["oneOf"][0],
        json!({"const": "value1", "title": "First Option"})
    );
    assert_eq!(p["legacyEnum"]["enumNames"].as_array().unwrap().len(), 3);
    assert!(p["untitledMulti"]["items"]["enum"].is_array());
    assert!(p["titledMulti"]["items"].get("enum").is_none());
    assert_eq!(
        p["titledMulti"]["items"]["anyOf"][2]["title"],
        "Third Choice"
    );
}

#[test]
fn reconnection_tool_answers_when_the_transport_cannot_close_streams() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let exec2 = exec.clone();
    let (r, elapsed) = exec.block_on(async move {
        client.initialize().await.unwrap();
        let start = exec2.elapsed();
        let r = client
            .call_tool("test_reconnection", json!({}))
            .await
            .unwrap();
        (r, exec2.elapsed() - start)
    });
    assert_eq!(r.first_text(), Some("Reconnection test completed"));
    assert_eq!(elapsed, Duration::from_millis(100));
}

#[test]
fn notify_session_sends_a_log_message_not_tied_to_the_request() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let (result, notes) = exec.block_on(async move {
        client.initialize().await.unwrap();
        let mut notes = client.notifications();
        let result = client
            .call_tool("test_notify_session", json!({}))
            .await
            .unwrap();
        // One more round trip, so that a notification sent beside the answer has arrived.
        client.list_tools().await.unwrap();
        (result, notes.drain())
    });
    assert_eq!(result.is_error, None);
    let logs: Vec<_> = notes
        .iter()
        .filter_map(|n| match n {
            ServerNotification::Log(l) => Some((l.logger.clone(), l.data.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        logs,
        [(
            Some("interop".to_owned()),
            json!("notification on the GET stream")
        )]
    );
}
