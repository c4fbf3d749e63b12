//! Unknown fields are tolerated everywhere and kept where the schema types carry an `extra`
//! map; values this crate does not know land in `Other` variants; discriminators and method
//! names are still checked. Needs no spec data.

use mcp_service::schema::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Deserializes `value` as `T` (which must succeed) and returns it with its re-serialization.
fn read<T: DeserializeOwned + Serialize>(value: &Value) -> (T, Value) {
    let typed: T = serde_json::from_str(&value.to_string())
        .unwrap_or_else(|e| panic!("{}: {e}\n  value: {value}", std::any::type_name::<T>()));
    let back = serde_json::to_value(&typed).expect("serializes");
    (typed, back)
}

#[test]
fn unknown_fields_are_kept_at_every_level() {
    let tool = json!({
        "name": "t",
        "inputSchema": { "type": "object", "x-raw": true },
        "annotations": { "readOnlyHint": true, "futureHint": "yes" },
        "icons": [{ "src": "https://x/i.png", "futureIconField": 1 }],
        "futureToolField": { "a": [1, 2] }
    });
    let (typed, back) = read::<Tool>(&tool);
    assert_eq!(back, tool);
    assert_eq!(typed.extra["futureToolField"], json!({ "a": [1, 2] }));
    assert_eq!(
        typed
            .annotations
            .as_ref()
            .map(|a| a.extra["futureHint"].clone()),
        Some(json!("yes"))
    );

    let result = json!({
        "content": [
            { "type": "text", "text": "hi", "futureTextField": 1 },
            { "type": "resource", "resource": { "uri": "file:///a", "text": "a", "q": 2 } }
        ],
        "structuredContent": { "k": "v" },
        "futureResultField": null
    });
    assert_eq!(read::<CallToolResult>(&result).1, result);

    let caps = json!({
        "roots": { "listChanged": true, "future": {} },
        "sampling": { "tools": {}, "future": 1 },
        "elicitation": { "form": {}, "future": 2 },
        "tasks": { "list": {}, "requests": { "sampling": { "createMessage": {} } } },
        "futureCapability": { "on": true }
    });
    assert_eq!(read::<ClientCapabilities>(&caps).1, caps);

    let init = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": { "tools": { "listChanged": true, "future": 1 }, "future": {} },
        "serverInfo": { "name": "s", "version": "1", "futureInfo": "x" },
        "futureInitField": [1]
    });
    assert_eq!(read::<InitializeResult>(&init).1, init);

    let sampling = json!({
        "messages": [{
            "role": "assistant",
            "content": [
                { "type": "tool_use", "id": "1", "name": "n", "input": {}, "future": 1 },
                { "type": "text", "text": "t" }
            ],
            "future": true
        }],
        "maxTokens": 10,
        "modelPreferences": { "hints": [{ "name": "m", "future": 1 }], "future": 2 },
        "task": { "ttl": 1000 }
    });
    assert_eq!(read::<CreateMessageRequestParams>(&sampling).1, sampling);

    let form = json!({
        "message": "m",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "z": { "type": "string", "pattern": "^a", "future": 1 },
                "a": { "type": "integer", "multipleOf": 2 }
            },
            "future": 3
        },
        "future": 4
    });
    let (typed, back) = read::<ElicitRequestParams>(&form);
    assert_eq!(back, form);
    // The form's fields keep the server's order.
    let ElicitRequestParams::Form(form) = typed else {
        panic!("a form")
    };
    let names: Vec<&str> = form
        .requested_schema
        .properties
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(names, ["z", "a"]);
}

#[test]
fn envelopes_tolerate_unknown_members() {
    let request = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "t", "future": 1 },
        "futureEnvelopeMember": true
    });
    let (typed, _) = read::<CallToolRequest>(&request);
    assert_eq!(typed.id, RequestId::Number(3));
    assert_eq!(
        typed.params.as_ref().map(|p| p.extra["future"].clone()),
        Some(json!(1))
    );

    let error = json!({
        "jsonrpc": "2.0", "id": "a",
        "error": { "code": -32022, "message": "m",
                   "data": { "supported": ["2026-07-28"], "requested": "x", "future": 1 } }
    });
    let (typed, back) = read::<UnsupportedProtocolVersionError>(&error);
    assert_eq!(back, error);
    assert_eq!(typed.error.data.map(|d| d.requested), Some("x".to_owned()));
}

#[test]
fn unknown_values_land_in_other_variants() {
    let block = json!({ "type": "video", "url": "https://x/v.mp4" });
    let (typed, back) = read::<ContentBlock>(&block);
    assert!(matches!(typed, ContentBlock::Other(_)));
    assert_eq!(back, block);

    let field = json!({ "type": "object", "properties": {} });
    assert!(matches!(
        read::<PrimitiveSchemaDefinition>(&field).0,
        PrimitiveSchemaDefinition::Other(_)
    ));

    let result = json!({ "role": "assistant", "content": { "type": "text", "text": "t" },
                         "model": "m", "stopReason": "refusal" });
    let (typed, back) = read::<CreateMessageResult>(&result);
    assert_eq!(typed.stop_reason, Some(StopReason::Other("refusal".into())));
    assert_eq!(back, result);

    let list = json!({ "resultType": "streaming", "tools": [] });
    let (typed, back) = read::<ListToolsResult>(&list);
    assert_eq!(
        typed.result_type,
        Some(ResultType::Other("streaming".into()))
    );
    assert_eq!(back, list);
}

#[test]
fn discriminators_and_methods_are_still_checked() {
    // A wrong `type` on a standalone content struct.
    assert!(
        serde_json::from_value::<TextContent>(json!({ "type": "image", "text": "t" })).is_err()
    );
    // A content block without `type`.
    assert!(serde_json::from_value::<ContentBlock>(json!({ "text": "t" })).is_err());
    // A framed request of another method.
    assert!(
        serde_json::from_value::<CallToolRequest>(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" })
        )
        .is_err()
    );
    // A wrong JSON-RPC version.
    assert!(
        serde_json::from_value::<PingRequest>(
            json!({ "jsonrpc": "1.0", "id": 1, "method": "ping" })
        )
        .is_err()
    );
    // An unknown elicitation mode.
    assert!(
        serde_json::from_value::<ElicitRequestParams>(
            json!({ "mode": "carrier-pigeon", "message": "m" })
        )
        .is_err()
    );
    // Missing required fields.
    assert!(serde_json::from_value::<Tool>(json!({ "name": "t" })).is_err());
    assert!(serde_json::from_value::<Implementation>(json!({ "name": "n" })).is_err());
}

#[test]
fn input_required_and_complete_results_are_told_apart() {
    let input = json!({
        "resultType": "input_required",
        "inputRequests": {
            "a": { "method": "roots/list" },
            "b": { "method": "future/method", "params": {} }
        },
        "requestState": "s"
    });
    let (typed, back) = read::<MaybeInputRequired<CallToolResult>>(&input);
    assert_eq!(back, input);
    let MaybeInputRequired::InputRequired(r) = typed else {
        panic!("input required")
    };
    let requests = r.input_requests.unwrap_or_default();
    assert!(matches!(requests["a"], InputRequest::ListRoots(_)));
    assert!(matches!(requests["b"], InputRequest::Other(_)));

    // A legacy result, with no `resultType`, is complete.
    let legacy = json!({ "content": [] });
    assert!(matches!(
        read::<MaybeInputRequired<CallToolResult>>(&legacy).0,
        MaybeInputRequired::Complete(_)
    ));
}

#[test]
fn typed_requests_tie_methods_to_types() {
    fn method<R: RequestKind>() -> &'static str {
        R::METHOD
    }
    assert_eq!(method::<CallTool>(), methods::TOOLS_CALL);
    assert_eq!(method::<Initialize>(), "initialize");
    assert_eq!(method::<Discover>(), "server/discover");
    assert_eq!(
        <Cancelled as NotificationKind>::METHOD,
        "notifications/cancelled"
    );

    let request = CallToolRequest::new(
        7,
        CallToolRequestParams {
            name: "t".into(),
            ..CallToolRequestParams::default()
        },
    );
    assert_eq!(
        serde_json::to_value(&request).expect("serializes"),
        json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": "t" } })
    );
    let result: <CallTool as RequestKind>::Result = CallToolResult::text("ok");
    assert_eq!(
        serde_json::to_value(&result).expect("serializes"),
        json!({ "content": [{ "type": "text", "text": "ok" }] })
    );

    assert_eq!(ProtocolVersion::LATEST_LEGACY, ProtocolVersion::LEGACY[0]);
    assert_eq!(
        ProtocolVersion::parse("2025-03-26"),
        Some(ProtocolVersion::V2025_03_26)
    );
}

#[test]
fn request_meta_reads_the_modern_keys() {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "c", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": { "roots": {} },
        "io.modelcontextprotocol/logLevel": "warning",
        "progressToken": 9,
        "com.example/other": 1
    });
    let Value::Object(map) = meta.clone() else {
        unreachable!()
    };
    let view = RequestMeta::from_meta(&map).expect("reads");
    assert_eq!(
        view.protocol_version.as_deref(),
        Some(ProtocolVersion::V2026_07_28.as_str())
    );
    assert_eq!(view.log_level, Some(LoggingLevel::Warning));
    assert_eq!(view.progress_token, Some(ProgressToken::Number(9)));
    assert_eq!(Value::Object(view.to_meta()), meta);
    assert!(LoggingLevel::Error > LoggingLevel::Warning);
}
