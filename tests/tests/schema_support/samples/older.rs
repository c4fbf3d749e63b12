//! Samples shaped to 2025-06-18 and 2025-03-26: only fields those revisions define.

use std::collections::BTreeMap;

use mcp_service::schema::*;
use serde_json::json;

use super::*;

/// Values restricted to the fields of 2025-06-18 (lifecycle, tools, resources, prompts and
/// their content).
pub(crate) fn rev_2025_06_18() -> Vec<Sample> {
    let implementation = Implementation {
        name: "example".into(),
        title: Some("Example".into()),
        version: "1.0.0".into(),
        ..Implementation::default()
    };
    let annotations = Annotations {
        audience: Some(vec![Role::User]),
        priority: Some(1.into()),
        last_modified: Some("2025-01-12T15:00:58Z".into()),
        ..Annotations::default()
    };
    let tool = Tool {
        name: "sum".into(),
        title: Some("Sum".into()),
        description: Some("Adds".into()),
        input_schema: obj(json!({
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
            "required": ["a", "b"]
        })),
        output_schema: Some(obj(json!({
            "type": "object",
            "properties": { "sum": { "type": "number" } }
        }))),
        annotations: Some(ToolAnnotations {
            read_only_hint: Some(true),
            ..ToolAnnotations::default()
        }),
        meta: Some(meta()),
        ..Tool::default()
    };
    let resource = Resource {
        uri: "file:///a.txt".into(),
        name: "a.txt".into(),
        title: Some("A".into()),
        description: Some("A file".into()),
        mime_type: Some("text/plain".into()),
        size: Some(1),
        annotations: Some(annotations.clone()),
        meta: Some(meta()),
        ..Resource::default()
    };
    let template = ResourceTemplate {
        uri_template: "file:///{name}".into(),
        name: "files".into(),
        title: Some("Files".into()),
        description: Some("Files".into()),
        mime_type: Some("text/plain".into()),
        annotations: Some(annotations.clone()),
        meta: Some(meta()),
        ..ResourceTemplate::default()
    };
    let prompt = Prompt {
        name: "greet".into(),
        title: Some("Greet".into()),
        description: Some("Says hello".into()),
        arguments: Some(vec![prompt_argument()]),
        meta: Some(meta()),
        ..Prompt::default()
    };
    let text = TextContent {
        text: "hi".into(),
        annotations: Some(annotations.clone()),
        meta: Some(meta()),
        ..TextContent::default()
    };
    let link = ResourceLink {
        uri: "file:///a.txt".into(),
        name: "a.txt".into(),
        title: Some("A".into()),
        mime_type: Some("text/plain".into()),
        ..ResourceLink::default()
    };
    let client_caps = ClientCapabilities {
        roots: Some(RootsCapability {
            list_changed: Some(true),
            ..RootsCapability::default()
        }),
        sampling: Some(SamplingCapability::default()),
        elicitation: Some(ElicitationCapability::default()),
        ..ClientCapabilities::default()
    };
    let init = InitializeRequestParams {
        protocol_version: "2025-06-18".into(),
        capabilities: client_caps.clone(),
        client_info: implementation.clone(),
        ..InitializeRequestParams::default()
    };
    let init_result = InitializeResult {
        protocol_version: "2025-06-18".into(),
        capabilities: server_capabilities(),
        server_info: implementation.clone(),
        instructions: Some("hi".into()),
        ..InitializeResult::default()
    };
    let call_result = CallToolResult {
        content: vec![text.clone().into(), link.clone().into(), embedded().into()],
        structured_content: Some(json!({ "sum": 3 })),
        is_error: Some(false),
        ..CallToolResult::default()
    };
    vec![
        sample("Implementation", &implementation),
        sample("ClientCapabilities", &client_caps),
        sample("ServerCapabilities", &server_capabilities()),
        sample("InitializeRequest", &req::<Initialize>(1, init)),
        sample("InitializeResult", &init_result),
        sample("Tool", &tool),
        sample(
            "ListToolsResult",
            &ListToolsResult {
                tools: vec![tool.clone()],
                next_cursor: Some("n".into()),
                ..ListToolsResult::default()
            },
        ),
        sample(
            "CallToolRequest",
            &req::<CallTool>(
                2,
                CallToolRequestParams {
                    name: "sum".into(),
                    arguments: Some(obj(json!({ "a": 1, "b": 2 }))),
                    ..CallToolRequestParams::default()
                },
            ),
        ),
        sample("CallToolResult", &call_result),
        sample("Resource", &resource),
        sample("ResourceTemplate", &template),
        sample(
            "ListResourcesResult",
            &ListResourcesResult {
                resources: vec![resource.clone()],
                ..ListResourcesResult::default()
            },
        ),
        sample(
            "ListResourceTemplatesResult",
            &ListResourceTemplatesResult {
                resource_templates: vec![template.clone()],
                ..ListResourceTemplatesResult::default()
            },
        ),
        sample(
            "ReadResourceResult",
            &ReadResourceResult {
                contents: vec![text_contents().into(), blob_contents().into()],
                ..ReadResourceResult::default()
            },
        ),
        sample("Prompt", &prompt),
        sample("PromptArgument", &prompt_argument()),
        sample(
            "PromptMessage",
            &PromptMessage::new(Role::User, link.clone()),
        ),
        sample(
            "ListPromptsResult",
            &ListPromptsResult {
                prompts: vec![prompt.clone()],
                ..ListPromptsResult::default()
            },
        ),
        sample(
            "GetPromptResult",
            &GetPromptResult {
                description: Some("d".into()),
                messages: vec![PromptMessage::new(Role::User, text.clone())],
                ..GetPromptResult::default()
            },
        ),
        sample("TextContent", &text),
        sample("ResourceLink", &link),
        sample("CompleteRequest", &req::<Complete>(3, complete_params())),
    ]
}

/// Values restricted to the fields of 2025-03-26 (lifecycle, tools, resources, prompts and
/// their content).
pub(crate) fn rev_2025_03_26() -> Vec<Sample> {
    let implementation = Implementation::new("example", "1.0.0");
    let annotations = Annotations {
        audience: Some(vec![Role::Assistant]),
        priority: Some(num(0.25)),
        ..Annotations::default()
    };
    let tool = Tool {
        name: "sum".into(),
        description: Some("Adds".into()),
        input_schema: obj(json!({
            "type": "object",
            "properties": { "a": { "type": "number" } },
            "required": ["a"]
        })),
        annotations: Some(ToolAnnotations {
            title: Some("Sum".into()),
            destructive_hint: Some(false),
            ..ToolAnnotations::default()
        }),
        ..Tool::default()
    };
    let resource = Resource {
        uri: "file:///a.txt".into(),
        name: "a.txt".into(),
        description: Some("A file".into()),
        mime_type: Some("text/plain".into()),
        size: Some(1),
        annotations: Some(annotations.clone()),
        ..Resource::default()
    };
    let template = ResourceTemplate {
        uri_template: "file:///{name}".into(),
        name: "files".into(),
        description: Some("Files".into()),
        mime_type: Some("text/plain".into()),
        annotations: Some(annotations.clone()),
        ..ResourceTemplate::default()
    };
    let argument = PromptArgument {
        name: "who".into(),
        description: Some("Whom to greet".into()),
        required: Some(false),
        ..PromptArgument::default()
    };
    let prompt = Prompt {
        name: "greet".into(),
        description: Some("Says hello".into()),
        arguments: Some(vec![argument.clone()]),
        ..Prompt::default()
    };
    let text = TextContent {
        text: "hi".into(),
        annotations: Some(annotations.clone()),
        ..TextContent::default()
    };
    let image = ImageContent {
        data: "iVBORw0KGgo=".into(),
        mime_type: "image/png".into(),
        ..ImageContent::default()
    };
    let audio = AudioContent {
        data: "UklGRg==".into(),
        mime_type: "audio/wav".into(),
        ..AudioContent::default()
    };
    let embedded = EmbeddedResource::new(TextResourceContents {
        uri: "file:///a.txt".into(),
        mime_type: Some("text/plain".into()),
        text: "a".into(),
        ..TextResourceContents::default()
    });
    let client_caps = ClientCapabilities {
        roots: Some(RootsCapability {
            list_changed: Some(true),
            ..RootsCapability::default()
        }),
        sampling: Some(SamplingCapability::default()),
        experimental: Some(BTreeMap::from([("x".to_owned(), JsonObject::new())])),
        ..ClientCapabilities::default()
    };
    let init = InitializeRequestParams {
        protocol_version: "2025-03-26".into(),
        capabilities: client_caps.clone(),
        client_info: implementation.clone(),
        ..InitializeRequestParams::default()
    };
    let init_result = InitializeResult {
        protocol_version: "2025-03-26".into(),
        capabilities: server_capabilities(),
        server_info: implementation.clone(),
        instructions: Some("hi".into()),
        ..InitializeResult::default()
    };
    vec![
        sample("Implementation", &implementation),
        sample("ClientCapabilities", &client_caps),
        sample("ServerCapabilities", &server_capabilities()),
        sample("InitializeRequest", &req::<Initialize>(1, init)),
        sample("InitializeResult", &init_result),
        sample("Tool", &tool),
        sample(
            "ListToolsResult",
            &ListToolsResult {
                tools: vec![tool.clone()],
                next_cursor: Some("n".into()),
                ..ListToolsResult::default()
            },
        ),
        sample(
            "CallToolRequest",
            &req::<CallTool>(
                2,
                CallToolRequestParams {
                    name: "sum".into(),
                    arguments: Some(obj(json!({ "a": 1 }))),
                    ..CallToolRequestParams::default()
                },
            ),
        ),
        sample(
            "CallToolResult",
            &CallToolResult {
                content: vec![
                    text.clone().into(),
                    image.clone().into(),
                    audio.clone().into(),
                    embedded.clone().into(),
                ],
                is_error: Some(false),
                ..CallToolResult::default()
            },
        ),
        sample("Resource", &resource),
        sample("ResourceTemplate", &template),
        sample(
            "ListResourcesResult",
            &ListResourcesResult {
                resources: vec![resource.clone()],
                ..ListResourcesResult::default()
            },
        ),
        sample(
            "ListResourceTemplatesResult",
            &ListResourceTemplatesResult {
                resource_templates: vec![template.clone()],
                ..ListResourceTemplatesResult::default()
            },
        ),
        sample("Prompt", &prompt),
        sample("PromptArgument", &argument),
        sample(
            "PromptMessage",
            &PromptMessage::new(Role::User, audio.clone()),
        ),
        sample(
            "GetPromptResult",
            &GetPromptResult {
                description: Some("d".into()),
                messages: vec![
                    PromptMessage::new(Role::User, text.clone()),
                    PromptMessage::new(Role::Assistant, embedded.clone()),
                ],
                ..GetPromptResult::default()
            },
        ),
        sample("TextContent", &text),
        sample("ImageContent", &image),
        sample("AudioContent", &audio),
        sample("EmbeddedResource", &embedded),
    ]
}
