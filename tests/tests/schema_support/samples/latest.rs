//! Samples of every modelled 2025-11-25 definition.

use mcp_service::schema::*;
use serde_json::json;

use super::*;

/// Values for every definition of 2025-11-25 this crate models, by definition name.
pub(crate) fn rev_2025_11_25() -> Vec<Sample> {
    let call_tool_request = req::<CallTool>(1, call_tool_params());
    let ping = JsonRpcRequest::<Ping> {
        id: RequestId::from("ping-1"),
        params: None,
    };
    let list_tools = req::<ListTools>(2, paginated());
    let progress = note::<Progress>(progress_params());
    let initialized = note::<Initialized>(notification_params());
    let result_response = JsonRpcResultResponse {
        id: RequestId::from(1),
        result: call_tool_result(),
    };
    let error_response = JsonRpcErrorResponse {
        id: Some(RequestId::from("x")),
        error: ErrorObject::invalid_params("Unknown tool: nope")
            .with_data(json!({ "tool": "nope" })),
    };
    let untitled = PrimitiveSchemaDefinition::UntitledSingleSelectEnum(untitled_single());

    let client_requests = vec![
        sample("ClientRequest", &req::<Initialize>(1, initialize_params())),
        sample("ClientRequest", &ping),
        sample("ClientRequest", &req::<ListResources>(1, paginated())),
        sample(
            "ClientRequest",
            &req::<ListResourceTemplates>(1, paginated()),
        ),
        sample(
            "ClientRequest",
            &req::<ReadResource>(1, read_resource_params()),
        ),
        sample("ClientRequest", &list_tools),
        sample("ClientRequest", &call_tool_request),
        sample("ClientRequest", &req::<ListPrompts>(1, paginated())),
        sample("ClientRequest", &req::<GetPrompt>(1, get_prompt_params())),
        sample("ClientRequest", &req::<Complete>(1, complete_params())),
        sample(
            "ClientRequest",
            &req::<SetLevel>(1, SetLevelRequestParams::new(LoggingLevel::Info)),
        ),
    ];

    let mut all = vec![
        // Scalars and small pieces.
        sample("RequestId", &RequestId::from(7)),
        sample("RequestId", &RequestId::from("seven")),
        sample("ProgressToken", &ProgressToken::from("tok")),
        sample("Cursor", &"page-2"),
        sample("Role", &Role::Assistant),
        sample("LoggingLevel", &LoggingLevel::Emergency),
        sample("Icon", &icon()),
        sample("Icons", &tool()),
        sample("BaseMetadata", &implementation()),
        sample("Annotations", &annotations()),
        sample("Implementation", &implementation()),
        sample("ClientCapabilities", &client_capabilities()),
        sample("ServerCapabilities", &server_capabilities()),
        // Content.
        sample("TextContent", &text()),
        sample("ImageContent", &image()),
        sample("AudioContent", &audio()),
        sample("ResourceLink", &resource_link()),
        sample("EmbeddedResource", &embedded()),
        sample("EmbeddedResource", &EmbeddedResource::new(blob_contents())),
        sample("ContentBlock", &ContentBlock::from(text())),
        sample("ContentBlock", &ContentBlock::from(resource_link())),
        sample("ContentBlock", &ContentBlock::from(embedded())),
        sample("ToolUseContent", &tool_use()),
        sample("ToolResultContent", &tool_result()),
        sample(
            "SamplingMessageContentBlock",
            &SamplingMessageContentBlock::from(tool_result()),
        ),
        sample("TextResourceContents", &text_contents()),
        sample("BlobResourceContents", &blob_contents()),
        sample("ResourceContents", &ResourceContents::from(blob_contents())),
        // Base params and results.
        sample("RequestParams", &request_params()),
        sample("NotificationParams", &notification_params()),
        sample("PaginatedRequestParams", &paginated()),
        sample("PaginatedResult", &list_tools_result()),
        sample("Result", &empty_result()),
        sample("EmptyResult", &empty_result()),
        sample("Request", &MethodCall::<Ping>::new(request_params())),
        sample("Notification", &progress),
        // Lifecycle.
        sample("InitializeRequestParams", &initialize_params()),
        sample(
            "InitializeRequest",
            &req::<Initialize>(0, initialize_params()),
        ),
        sample("InitializeResult", &initialize_result()),
        sample("InitializedNotification", &initialized),
        sample("PingRequest", &ping),
        sample("PingRequest", &req::<Ping>(3, request_params())),
        // Tools.
        sample("Tool", &tool()),
        sample("Tool", &Tool::new("bare")),
        sample("ToolAnnotations", &tool().annotations),
        sample("ToolExecution", &tool().execution),
        sample("ListToolsRequest", &list_tools),
        sample("PaginatedRequest", &list_tools),
        sample(
            "ListToolsRequest",
            &JsonRpcRequest::<ListTools> {
                id: 9.into(),
                params: None,
            },
        ),
        sample("ListToolsResult", &list_tools_result()),
        sample("CallToolRequestParams", &call_tool_params()),
        sample("CallToolRequest", &call_tool_request),
        sample("CallToolResult", &call_tool_result()),
        sample("CallToolResult", &CallToolResult::error("boom")),
        sample(
            "ToolListChangedNotification",
            &note::<ToolListChanged>(notification_params()),
        ),
        // Resources.
        sample("Resource", &resource()),
        sample("ResourceTemplate", &resource_template()),
        sample(
            "ListResourcesRequest",
            &req::<ListResources>(4, paginated()),
        ),
        sample("ListResourcesResult", &list_resources_result()),
        sample(
            "ListResourceTemplatesRequest",
            &req::<ListResourceTemplates>(5, paginated()),
        ),
        sample("ListResourceTemplatesResult", &list_templates_result()),
        sample("ReadResourceRequestParams", &read_resource_params()),
        sample("ResourceRequestParams", &read_resource_params()),
        sample(
            "ReadResourceRequest",
            &req::<ReadResource>(6, read_resource_params()),
        ),
        sample("ReadResourceResult", &read_resource_result()),
        sample(
            "SubscribeRequestParams",
            &SubscribeRequestParams {
                uri: "file:///a".into(),
                meta: Some(meta()),
                ..SubscribeRequestParams::default()
            },
        ),
        sample(
            "SubscribeRequest",
            &req::<Subscribe>(
                7,
                SubscribeRequestParams {
                    uri: "file:///a".into(),
                    ..SubscribeRequestParams::default()
                },
            ),
        ),
        sample(
            "UnsubscribeRequestParams",
            &UnsubscribeRequestParams {
                uri: "file:///a".into(),
                ..UnsubscribeRequestParams::default()
            },
        ),
        sample(
            "UnsubscribeRequest",
            &req::<Unsubscribe>(
                8,
                UnsubscribeRequestParams {
                    uri: "file:///a".into(),
                    ..UnsubscribeRequestParams::default()
                },
            ),
        ),
        sample(
            "ResourceUpdatedNotificationParams",
            &ResourceUpdatedNotificationParams {
                uri: "file:///a".into(),
                meta: Some(meta()),
                ..ResourceUpdatedNotificationParams::default()
            },
        ),
        sample(
            "ResourceUpdatedNotification",
            &note::<ResourceUpdated>(ResourceUpdatedNotificationParams {
                uri: "file:///a".into(),
                ..ResourceUpdatedNotificationParams::default()
            }),
        ),
        sample(
            "ResourceListChangedNotification",
            &note::<ResourceListChanged>(notification_params()),
        ),
        // Prompts.
        sample("Prompt", &prompt()),
        sample("PromptArgument", &prompt_argument()),
        sample("PromptMessage", &PromptMessage::new(Role::User, embedded())),
        sample("ListPromptsRequest", &req::<ListPrompts>(9, paginated())),
        sample("ListPromptsResult", &list_prompts_result()),
        sample("GetPromptRequestParams", &get_prompt_params()),
        sample(
            "GetPromptRequest",
            &req::<GetPrompt>(10, get_prompt_params()),
        ),
        sample("GetPromptResult", &get_prompt_result()),
        sample(
            "PromptListChangedNotification",
            &note::<PromptListChanged>(notification_params()),
        ),
        // Logging.
        sample(
            "SetLevelRequestParams",
            &SetLevelRequestParams {
                meta: Some(meta()),
                ..SetLevelRequestParams::new(LoggingLevel::Warning)
            },
        ),
        sample(
            "SetLevelRequest",
            &req::<SetLevel>(11, SetLevelRequestParams::new(LoggingLevel::Debug)),
        ),
        sample("LoggingMessageNotificationParams", &logging_params()),
        sample(
            "LoggingMessageNotification",
            &note::<LoggingMessage>(logging_params()),
        ),
        // Completion.
        sample(
            "PromptReference",
            &PromptReference {
                name: "p".into(),
                title: Some("P".into()),
                ..PromptReference::default()
            },
        ),
        sample(
            "ResourceTemplateReference",
            &ResourceTemplateReference {
                uri: "file:///{path}".into(),
                ..ResourceTemplateReference::default()
            },
        ),
        sample("CompleteRequestParams", &complete_params()),
        sample(
            "CompleteRequestParams",
            &CompleteRequestParams {
                reference: CompletionReference::ResourceTemplate(ResourceTemplateReference {
                    uri: "file:///{path}".into(),
                    ..ResourceTemplateReference::default()
                }),
                context: None,
                meta: None,
                ..complete_params()
            },
        ),
        sample("CompleteRequest", &req::<Complete>(12, complete_params())),
        sample("CompleteResult", &complete_result()),
        // Progress and cancellation.
        sample("ProgressNotificationParams", &progress_params()),
        sample("ProgressNotification", &progress),
        sample("CancelledNotificationParams", &cancelled_params()),
        sample(
            "CancelledNotificationParams",
            &CancelledNotificationParams {
                reason: Some("task cancelled elsewhere".into()),
                ..CancelledNotificationParams::default()
            },
        ),
        sample(
            "CancelledNotification",
            &note::<Cancelled>(cancelled_params()),
        ),
        // Sampling.
        sample(
            "ModelHint",
            &model_preferences().hints.unwrap_or_default()[0],
        ),
        sample("ModelPreferences", &model_preferences()),
        sample("ToolChoice", &create_message_params().tool_choice),
        sample("SamplingMessage", &sampling_message()),
        sample("CreateMessageRequestParams", &create_message_params()),
        sample(
            "CreateMessageRequest",
            &req::<CreateMessage>(13, create_message_params()),
        ),
        sample("CreateMessageResult", &create_message_result()),
        // Elicitation.
        sample("StringSchema", &string_schema()),
        sample("NumberSchema", &number_schema()),
        sample("BooleanSchema", &boolean_schema()),
        sample("UntitledSingleSelectEnumSchema", &untitled_single()),
        sample("TitledSingleSelectEnumSchema", &titled_single()),
        sample("UntitledMultiSelectEnumSchema", &untitled_multi()),
        sample("TitledMultiSelectEnumSchema", &titled_multi()),
        sample("LegacyTitledEnumSchema", &legacy_enum()),
        sample("SingleSelectEnumSchema", &untitled),
        sample(
            "MultiSelectEnumSchema",
            &PrimitiveSchemaDefinition::TitledMultiSelectEnum(titled_multi()),
        ),
        sample("EnumSchema", &untitled),
        sample(
            "PrimitiveSchemaDefinition",
            &PrimitiveSchemaDefinition::Number(number_schema()),
        ),
        sample("ElicitRequestFormParams", &form_params()),
        sample("ElicitRequestURLParams", &url_params()),
        sample(
            "ElicitRequestParams",
            &ElicitRequestParams::from(form_params()),
        ),
        sample(
            "ElicitRequestParams",
            &ElicitRequestParams::from(url_params()),
        ),
        sample(
            "ElicitRequest",
            &req::<Elicit>(14, ElicitRequestParams::from(form_params())),
        ),
        sample(
            "ElicitRequest",
            &req::<Elicit>(15, ElicitRequestParams::from(url_params())),
        ),
        sample("ElicitResult", &elicit_result()),
        sample("ElicitResult", &ElicitResult::new(ElicitAction::Decline)),
        sample(
            "ElicitationCompleteNotification",
            &note::<ElicitationComplete>(ElicitationCompleteNotificationParams {
                elicitation_id: "el-1".into(),
                ..ElicitationCompleteNotificationParams::default()
            }),
        ),
        sample(
            "URLElicitationRequiredError",
            &JsonRpcErrorResponse {
                id: Some(1.into()),
                error: ErrorObject::new(error_codes::URL_ELICITATION_REQUIRED, "Sign in first")
                    .with_data(UrlElicitationRequiredData {
                        elicitations: vec![url_params()],
                        ..UrlElicitationRequiredData::default()
                    }),
            },
        ),
        // Roots.
        sample("Root", &root()),
        sample(
            "ListRootsResult",
            &ListRootsResult {
                roots: vec![root()],
                meta: Some(meta()),
                ..ListRootsResult::default()
            },
        ),
        sample("ListRootsRequest", &req::<ListRoots>(16, request_params())),
        sample(
            "RootsListChangedNotification",
            &note::<RootsListChanged>(notification_params()),
        ),
        // JSON-RPC framing.
        sample("Error", &error_response.error),
        sample("JSONRPCRequest", &call_tool_request),
        sample("JSONRPCNotification", &progress),
        sample("JSONRPCResultResponse", &result_response),
        sample("JSONRPCErrorResponse", &error_response),
        sample("JSONRPCResponse", &result_response),
        sample("JSONRPCResponse", &error_response),
        sample("JSONRPCMessage", &call_tool_request),
        sample("JSONRPCMessage", &progress),
        sample("JSONRPCMessage", &error_response),
        // The unions.
        sample("ServerRequest", &ping),
        sample(
            "ServerRequest",
            &req::<CreateMessage>(1, create_message_params()),
        ),
        sample("ServerRequest", &req::<ListRoots>(1, request_params())),
        sample(
            "ServerRequest",
            &req::<Elicit>(1, ElicitRequestParams::from(url_params())),
        ),
        sample("ClientNotification", &note::<Cancelled>(cancelled_params())),
        sample("ClientNotification", &initialized),
        sample("ClientNotification", &progress),
        sample(
            "ClientNotification",
            &note::<RootsListChanged>(notification_params()),
        ),
        sample(
            "ServerNotification",
            &note::<LoggingMessage>(logging_params()),
        ),
        sample(
            "ServerNotification",
            &note::<ResourceListChanged>(notification_params()),
        ),
        sample("ClientResult", &create_message_result()),
        sample("ClientResult", &elicit_result()),
        sample("ServerResult", &initialize_result()),
        sample("ServerResult", &call_tool_result()),
        sample("ServerResult", &complete_result()),
        sample("ServerResult", &get_prompt_result()),
    ];
    all.extend(client_requests);
    all
}
