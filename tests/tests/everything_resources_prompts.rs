//! The everything server's resources, template, subscriptions, prompts, completion and the
//! lifecycle methods, end to end over the in-memory pair.

use mcp_proto::jsonrpc::error_codes;
use mcp_service::client::ServerNotification;
use mcp_service::schema::{ContentBlock, ResourceContents, Role};
use mcp_tests::everything::{self, PNG};
use mcp_tests::harness::{conformance_client, pair};
use serde_json::json;

#[test]
fn initialize_declares_capabilities_and_negotiates() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    let init = exec.block_on(async move { client.initialize().await.unwrap() });
    assert_eq!(init.protocol_version, "2025-11-25");
    assert_eq!(init.server_info.name, "mcp-everything");
    assert!(init.instructions.is_some());
    let caps = serde_json::to_value(&init.capabilities).unwrap();
    assert_eq!(
        caps,
        json!({
            "extensions": {
                "io.modelcontextprotocol/skills": {"directoryRead": true},
                "io.modelcontextprotocol/tasks": {}
            },
            "logging": {},
            "completions": {},
            "prompts": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "tools": {"listChanged": true}
        })
    );
    let state = lb.session.state();
    assert_eq!(state.client_info.unwrap().name, "conformance-test-client");
    assert!(state.client_capabilities.unwrap().sampling.is_some());
    assert!(state.initialized, "notifications/initialized arrived");
}

#[test]
fn resources_list_read_and_template() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    exec.block_on(async move {
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
        assert!(
            list.iter()
                .all(|r| !r.name.is_empty() && r.description.is_some())
        );

        let templates = client.list_resource_templates().await.unwrap();
        assert_eq!(templates.len(), 1);
        assert_eq!(templates[0].uri_template, "test://template/{id}/data");

        let r = client.read_resource("test://static-text").await.unwrap();
        let [ResourceContents::Text(t)] = &r.contents[..] else {
            panic!("{r:?}")
        };
        assert_eq!(t.text, "This is the content of the static text resource.");
        assert_eq!(t.mime_type.as_deref(), Some("text/plain"));

        let r = client.read_resource("test://static-binary").await.unwrap();
        let [ResourceContents::Blob(b)] = &r.contents[..] else {
            panic!("{r:?}")
        };
        assert_eq!(
            (b.blob.as_str(), b.mime_type.as_deref()),
            (PNG, Some("image/png"))
        );

        let r = client
            .read_resource("test://template/123/data")
            .await
            .unwrap();
        let [ResourceContents::Text(t)] = &r.contents[..] else {
            panic!("{r:?}")
        };
        assert_eq!(t.uri, "test://template/123/data");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&t.text).unwrap(),
            json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"})
        );

        let err = client.read_resource("test://nope").await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::RESOURCE_NOT_FOUND));
    });
}

#[test]
fn subscribe_updates_and_unsubscribe() {
    let server = everything::server();
    let (exec, lb) = pair(&server, conformance_client());
    let client = lb.client.clone();
    let server2 = server.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let mut notes = client.notifications();
        client.subscribe("test://watched-resource").await.unwrap();
        assert_eq!(server2.notify_resource_updated("test://watched-resource"), 1);
        assert_eq!(server2.notify_resource_updated("test://static-text"), 0, "not subscribed");
        client.ping().await.unwrap();
        let got = notes.drain();
        assert!(
            matches!(&got[..], [ServerNotification::ResourceUpdated(u)] if u.uri == "test://watched-resource"),
            "{got:?}"
        );
        client.unsubscribe("test://watched-resource").await.unwrap();
        assert_eq!(server2.notify_resource_updated("test://watched-resource"), 0);
        let err = client.subscribe("test://unknown").await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::RESOURCE_NOT_FOUND));
        // A template URI can be subscribed to.
        client.subscribe("test://template/9/data").await.unwrap();
    });
}

#[test]
fn prompts_list_and_get() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let prompts = client.list_prompts().await.unwrap();
        let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "test_simple_prompt",
                "test_prompt_with_arguments",
                "test_prompt_with_embedded_resource",
                "test_prompt_with_image",
                "test_input_required_result_prompt"
            ]
        );
        assert!(prompts.iter().all(|p| p.description.as_deref().is_some_and(|d| !d.is_empty())));

        let r = client.get_prompt("test_simple_prompt", [("", ""); 0]).await.unwrap();
        assert_eq!(r.messages.len(), 1);
        assert_eq!(r.messages[0].role, Role::User);
        assert!(matches!(&r.messages[0].content, ContentBlock::Text(t) if t.text == "This is a simple prompt for testing."));

        let r = client
            .get_prompt("test_prompt_with_arguments", [("arg1", "testValue1"), ("arg2", "testValue2")])
            .await
            .unwrap();
        assert!(matches!(&r.messages[0].content, ContentBlock::Text(t)
            if t.text == "Prompt with arguments: arg1='testValue1', arg2='testValue2'"));

        let r = client
            .get_prompt("test_prompt_with_embedded_resource", [("resourceUri", "test://example-resource")])
            .await
            .unwrap();
        let ContentBlock::Resource(e) = &r.messages[0].content else { panic!("{r:?}") };
        assert_eq!(e.resource.uri(), "test://example-resource");
        assert!(matches!(&r.messages[1].content, ContentBlock::Text(_)));

        let r = client.get_prompt("test_prompt_with_image", [("", ""); 0]).await.unwrap();
        assert!(matches!(&r.messages[0].content, ContentBlock::Image(i) if i.data == PNG && i.mime_type == "image/png"));

        // Protocol errors: a missing required argument, an unknown prompt.
        let err = client.get_prompt("test_prompt_with_arguments", [("arg1", "x")]).await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
        assert!(err.to_string().contains("arg2"), "{err}");
        let err = client.get_prompt("nope", [("", ""); 0]).await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
    });
}

#[test]
fn completion_ping_and_set_level() {
    let (exec, lb) = pair(&everything::server(), conformance_client());
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let r = client
            .complete_prompt_argument("test_prompt_with_arguments", "arg1", "test")
            .await
            .unwrap();
        assert_eq!(r.completion.values, ["testValue1", "testValue2"]);
        assert_eq!(
            (r.completion.total, r.completion.has_more),
            (Some(2), Some(false))
        );
        let r = client
            .complete_prompt_argument("test_simple_prompt", "x", "")
            .await
            .unwrap();
        assert!(r.completion.values.is_empty());
        client.ping().await.unwrap();
        client
            .set_level(mcp_service::schema::LoggingLevel::Info)
            .await
            .unwrap();
    });
    assert_eq!(
        lb.session.state().log_level,
        Some(mcp_service::schema::LoggingLevel::Info)
    );
    // `ping` and `logging/setLevel` answer exactly `{}`.
    let empty_results = lb
        .wire
        .messages()
        .into_iter()
        .filter_map(|(_, m)| match m {
            mcp_proto::jsonrpc::Message::Response(r) => match r.outcome {
                mcp_proto::jsonrpc::Outcome::Result(raw) => Some(raw.get().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .filter(|t| t == "{}")
        .count();
    assert_eq!(empty_results, 2);
}
