//! Samples of the 2026-07-28 additions.

use std::collections::BTreeMap;

use mcp_service::schema::*;
use serde_json::json;

use super::*;

/// Request `_meta` as 2026-07-28 requires it.
pub(crate) fn modern_request_meta() -> Meta {
    RequestMeta {
        protocol_version: Some(ProtocolVersion::V2026_07_28.as_str().into()),
        client_info: Some(implementation()),
        client_capabilities: Some(client_capabilities()),
        log_level: Some(LoggingLevel::Info),
        progress_token: Some(ProgressToken::from(5)),
        ..RequestMeta::default()
    }
    .to_meta()
}

/// Values of the 2026-07-28 additions, by that revision's definition names.
pub(crate) fn rev_2026_07_28() -> Vec<Sample> {
    let server_info = ResultMeta {
        server_info: Some(implementation()),
        ..ResultMeta::default()
    }
    .to_meta();
    let subscription = NotificationMeta {
        subscription_id: Some("listen-1".into()),
        ..NotificationMeta::default()
    }
    .to_meta();
    let listen_meta = ResultMeta {
        server_info: Some(implementation()),
        subscription_id: Some("listen-1".into()),
        ..ResultMeta::default()
    }
    .to_meta();
    let discover = DiscoverResult {
        supported_versions: vec![
            ProtocolVersion::V2026_07_28.as_str().into(),
            ProtocolVersion::LATEST_LEGACY.as_str().into(),
        ],
        capabilities: ServerCapabilities {
            extensions: Some(BTreeMap::from([(
                "io.modelcontextprotocol/tasks".to_owned(),
                JsonObject::new(),
            )])),
            ..server_capabilities()
        },
        instructions: Some("Use get_weather.".into()),
        ttl_ms: Some(60_000),
        cache_scope: Some(CacheScope::Public),
        meta: Some(server_info.clone()),
        ..DiscoverResult::default()
    };
    let filter = SubscriptionFilter {
        tools_list_changed: Some(true),
        prompts_list_changed: Some(false),
        resources_list_changed: Some(true),
        resource_subscriptions: Some(vec!["file:///config.json".into()]),
        ..SubscriptionFilter::default()
    };
    let input_requests = InputRequests::from([
        (
            "login".to_owned(),
            InputRequest::Elicit(MethodCall::new(ElicitRequestParams::Form(
                ElicitRequestFormParams {
                    meta: None,
                    ..form_params()
                },
            ))),
        ),
        (
            "capital".to_owned(),
            InputRequest::CreateMessage(MethodCall::new(CreateMessageRequestParams {
                meta: None,
                ..create_message_params()
            })),
        ),
        (
            "roots".to_owned(),
            InputRequest::ListRoots(MethodCall::new(RequestParams::default())),
        ),
    ]);
    let input_responses = InputResponses::from([
        ("login".to_owned(), InputResponse::Elicit(elicit_result())),
        (
            "capital".to_owned(),
            InputResponse::CreateMessage(create_message_result()),
        ),
        (
            "roots".to_owned(),
            InputResponse::ListRoots(ListRootsResult {
                roots: vec![root()],
                ..ListRootsResult::default()
            }),
        ),
    ]);
    let input_required = InputRequiredResult {
        input_requests: Some(input_requests.clone()),
        request_state: Some("opaque".into()),
        meta: Some(server_info.clone()),
        ..InputRequiredResult::default()
    };
    let retry = CallToolRequestParams {
        input_responses: Some(input_responses.clone()),
        request_state: Some("opaque".into()),
        meta: Some(modern_request_meta()),
        ..call_tool_params()
    };
    let complete_call = CallToolResult {
        result_type: Some(ResultType::Complete),
        structured_content: Some(json!([1, 2, 3])),
        ..call_tool_result()
    };
    let list_tools = ListToolsResult {
        result_type: Some(ResultType::Complete),
        ttl_ms: Some(0),
        cache_scope: Some(CacheScope::Private),
        meta: Some(server_info.clone()),
        ..list_tools_result()
    };
    vec![
        sample("RequestMetaObject", &modern_request_meta()),
        sample("ResultMetaObject", &server_info),
        sample("NotificationMetaObject", &subscription),
        sample("SubscriptionsListenResultMetaObject", &listen_meta),
        sample(
            "DiscoverRequest",
            &req::<Discover>(
                1,
                RequestParams {
                    meta: Some(modern_request_meta()),
                    ..RequestParams::default()
                },
            ),
        ),
        sample("DiscoverResult", &discover),
        sample(
            "DiscoverResultResponse",
            &JsonRpcResultResponse {
                id: 1.into(),
                result: discover.clone(),
            },
        ),
        sample("CacheableResult", &list_tools),
        sample("ListToolsResult", &list_tools),
        sample("InputRequests", &input_requests),
        sample("InputResponses", &input_responses),
        sample("InputRequiredResult", &input_required),
        sample("CallToolRequestParams", &retry),
        sample("CallToolRequest", &req::<CallTool>(2, retry.clone())),
        sample("CallToolResult", &complete_call),
        sample(
            "CallToolResultResponse",
            &CallToolResultResponse {
                id: 2.into(),
                result: MaybeInputRequired::InputRequired(input_required.clone()),
            },
        ),
        sample(
            "CallToolResultResponse",
            &CallToolResultResponse {
                id: 2.into(),
                result: MaybeInputRequired::Complete(complete_call.clone()),
            },
        ),
        sample("SubscriptionFilter", &filter),
        sample(
            "SubscriptionsListenRequest",
            &req::<SubscriptionsListen>(
                3,
                SubscriptionsListenRequestParams {
                    notifications: filter.clone(),
                    meta: Some(modern_request_meta()),
                    ..SubscriptionsListenRequestParams::default()
                },
            ),
        ),
        sample(
            "SubscriptionsListenResultResponse",
            &SubscriptionsListenResultResponse {
                id: 3.into(),
                result: SubscriptionsListenResult {
                    meta: Some(listen_meta.clone()),
                    ..SubscriptionsListenResult::default()
                },
            },
        ),
        sample(
            "SubscriptionsAcknowledgedNotification",
            &note::<SubscriptionsAcknowledged>(SubscriptionsAcknowledgedNotificationParams {
                notifications: filter.clone(),
                meta: Some(subscription.clone()),
                ..SubscriptionsAcknowledgedNotificationParams::default()
            }),
        ),
        sample(
            "ToolListChangedNotification",
            &note::<ToolListChanged>(NotificationParams {
                meta: Some(subscription.clone()),
                ..NotificationParams::default()
            }),
        ),
        sample(
            "HeaderMismatchError",
            &HeaderMismatchError {
                id: Some(1.into()),
                error: ErrorObject::header_mismatch("Mcp-Name does not match the body"),
            },
        ),
        sample(
            "UnsupportedProtocolVersionError",
            &UnsupportedProtocolVersionError {
                id: Some(1.into()),
                error: UnsupportedProtocolVersionData::error(
                    "1900-01-01",
                    [ProtocolVersion::V2026_07_28.as_str()],
                ),
            },
        ),
        sample(
            "MissingRequiredClientCapabilityError",
            &MissingRequiredClientCapabilityError {
                id: Some(1.into()),
                error: MissingRequiredClientCapabilityData::error(
                    "Needs elicitation",
                    ClientCapabilities {
                        elicitation: Some(ElicitationCapability::default()),
                        ..ClientCapabilities::default()
                    },
                ),
            },
        ),
        sample("ParseError", &ErrorObject::parse_error("Parse error")),
        sample("InvalidRequestError", &ErrorObject::invalid_request("Bad")),
        sample(
            "MethodNotFoundError",
            &ErrorObject::method_not_found("Nope"),
        ),
        sample(
            "InvalidParamsError",
            &ErrorObject::invalid_params("Bad cursor"),
        ),
        sample("InternalError", &ErrorObject::internal_error("Oops")),
    ]
}
