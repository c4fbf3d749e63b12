//! Populated values of the schema types, built in Rust, each paired with the name of the
//! spec definition it must validate against: the builders here, the per-revision sets in
//! `latest` (2025-11-25), `older` (2025-06-18, 2025-03-26) and `modern` (2026-07-28).

mod latest;
mod modern;
mod older;

pub(crate) use latest::rev_2025_11_25;
pub(crate) use modern::rev_2026_07_28;
pub(crate) use older::{rev_2025_03_26, rev_2025_06_18};

use std::collections::BTreeMap;

use mcp_service::schema::*;
use serde::Serialize;
use serde_json::{Value, json};

/// A serialized value and the definition it must satisfy.
pub(crate) struct Sample {
    /// The definition name (`Tool`, `CallToolRequest`, …).
    pub(crate) def: &'static str,
    /// The serialized value.
    pub(crate) value: Value,
}

/// Serializes `value` as a sample of `def`.
pub(crate) fn sample<T: Serialize>(def: &'static str, value: &T) -> Sample {
    Sample {
        def,
        value: serde_json::to_value(value)
            .unwrap_or_else(|e| panic!("{def}: serialization failed: {e}")),
    }
}

/// A JSON object literal as a [`JsonObject`].
pub(crate) fn obj(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

pub(crate) fn num(v: f64) -> serde_json::Number {
    serde_json::Number::from_f64(v).expect("finite")
}

pub(crate) fn meta() -> Meta {
    obj(json!({ "com.example/trace": "t-1", "progressToken": 7 }))
}

pub(crate) fn icon() -> Icon {
    Icon {
        src: "https://example.com/icon.png".into(),
        mime_type: Some("image/png".into()),
        sizes: Some(vec!["48x48".into(), "any".into()]),
        theme: Some(IconTheme::Dark),
        ..Icon::default()
    }
}

pub(crate) fn annotations() -> Annotations {
    Annotations {
        audience: Some(vec![Role::User, Role::Assistant]),
        priority: Some(num(0.5)),
        last_modified: Some("2025-01-12T15:00:58Z".into()),
        ..Annotations::default()
    }
}

pub(crate) fn implementation() -> Implementation {
    Implementation {
        name: "example".into(),
        title: Some("Example".into()),
        version: "1.2.3".into(),
        description: Some("An example implementation".into()),
        icons: Some(vec![icon()]),
        website_url: Some("https://example.com".into()),
        ..Implementation::default()
    }
}

pub(crate) fn client_capabilities() -> ClientCapabilities {
    ClientCapabilities {
        experimental: Some(BTreeMap::from([(
            "com.example/x".to_owned(),
            obj(json!({ "on": true })),
        )])),
        roots: Some(RootsCapability {
            list_changed: Some(true),
            ..RootsCapability::default()
        }),
        sampling: Some(SamplingCapability {
            context: Some(JsonObject::new()),
            tools: Some(JsonObject::new()),
            ..SamplingCapability::default()
        }),
        elicitation: Some(ElicitationCapability {
            form: Some(JsonObject::new()),
            url: Some(JsonObject::new()),
            ..ElicitationCapability::default()
        }),
        ..ClientCapabilities::default()
    }
}

pub(crate) fn server_capabilities() -> ServerCapabilities {
    ServerCapabilities {
        experimental: Some(BTreeMap::from([(
            "com.example/x".to_owned(),
            JsonObject::new(),
        )])),
        logging: Some(JsonObject::new()),
        completions: Some(JsonObject::new()),
        prompts: Some(ListChangedCapability {
            list_changed: Some(true),
            ..ListChangedCapability::default()
        }),
        resources: Some(ResourcesCapability {
            subscribe: Some(true),
            list_changed: Some(true),
            ..ResourcesCapability::default()
        }),
        tools: Some(ListChangedCapability {
            list_changed: Some(false),
            ..ListChangedCapability::default()
        }),
        ..ServerCapabilities::default()
    }
}

pub(crate) fn tool() -> Tool {
    Tool {
        name: "get_weather".into(),
        title: Some("Weather".into()),
        description: Some("Current weather for a city".into()),
        input_schema: obj(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": { "unit": { "enum": ["c", "f"] } },
            "properties": {
                "city": { "type": "string", "description": "City name" },
                "unit": { "$ref": "#/$defs/unit" }
            },
            "required": ["city"],
            "additionalProperties": false
        })),
        output_schema: Some(obj(json!({
            "type": "object",
            "properties": { "temperature": { "type": "number" } },
            "required": ["temperature"]
        }))),
        annotations: Some(ToolAnnotations {
            title: Some("Weather".into()),
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
            ..ToolAnnotations::default()
        }),
        execution: Some(ToolExecution {
            task_support: Some(TaskSupport::Optional),
            ..ToolExecution::default()
        }),
        icons: Some(vec![icon()]),
        meta: Some(meta()),
        ..Tool::default()
    }
}

pub(crate) fn text() -> TextContent {
    TextContent {
        text: "Hello".into(),
        annotations: Some(annotations()),
        meta: Some(meta()),
        ..TextContent::default()
    }
}

pub(crate) fn image() -> ImageContent {
    ImageContent {
        data: "iVBORw0KGgo=".into(),
        mime_type: "image/png".into(),
        annotations: Some(annotations()),
        meta: Some(meta()),
        ..ImageContent::default()
    }
}

pub(crate) fn audio() -> AudioContent {
    AudioContent {
        data: "UklGRiQAAABXQVZF".into(),
        mime_type: "audio/wav".into(),
        annotations: Some(annotations()),
        meta: Some(meta()),
        ..AudioContent::default()
    }
}

pub(crate) fn resource_link() -> ResourceLink {
    ResourceLink {
        uri: "file:///project/src/main.rs".into(),
        name: "main.rs".into(),
        title: Some("Main".into()),
        description: Some("Entry point".into()),
        mime_type: Some("text/x-rust".into()),
        size: Some(1024),
        annotations: Some(annotations()),
        icons: Some(vec![icon()]),
        meta: Some(meta()),
        ..ResourceLink::default()
    }
}

pub(crate) fn text_contents() -> TextResourceContents {
    TextResourceContents {
        uri: "file:///project/README.md".into(),
        mime_type: Some("text/markdown".into()),
        text: "# Readme".into(),
        meta: Some(meta()),
        ..TextResourceContents::default()
    }
}

pub(crate) fn blob_contents() -> BlobResourceContents {
    BlobResourceContents {
        uri: "file:///project/logo.png".into(),
        mime_type: Some("image/png".into()),
        blob: "iVBORw0KGgo=".into(),
        meta: Some(meta()),
        ..BlobResourceContents::default()
    }
}

pub(crate) fn embedded() -> EmbeddedResource {
    EmbeddedResource {
        annotations: Some(annotations()),
        meta: Some(meta()),
        ..EmbeddedResource::new(text_contents())
    }
}

pub(crate) fn resource() -> Resource {
    Resource {
        uri: "file:///project/README.md".into(),
        name: "README.md".into(),
        title: Some("Readme".into()),
        description: Some("Project readme".into()),
        mime_type: Some("text/markdown".into()),
        size: Some(2048),
        annotations: Some(annotations()),
        icons: Some(vec![icon()]),
        meta: Some(meta()),
        ..Resource::default()
    }
}

pub(crate) fn resource_template() -> ResourceTemplate {
    ResourceTemplate {
        uri_template: "file:///{path}".into(),
        name: "files".into(),
        title: Some("Project files".into()),
        description: Some("Any file of the project".into()),
        mime_type: Some("application/octet-stream".into()),
        annotations: Some(annotations()),
        icons: Some(vec![icon()]),
        meta: Some(meta()),
        ..ResourceTemplate::default()
    }
}

pub(crate) fn prompt_argument() -> PromptArgument {
    PromptArgument {
        name: "code".into(),
        title: Some("Code".into()),
        description: Some("The code to review".into()),
        required: Some(true),
        ..PromptArgument::default()
    }
}

pub(crate) fn prompt() -> Prompt {
    Prompt {
        name: "code_review".into(),
        title: Some("Code review".into()),
        description: Some("Reviews code".into()),
        arguments: Some(vec![prompt_argument()]),
        icons: Some(vec![icon()]),
        meta: Some(meta()),
        ..Prompt::default()
    }
}

pub(crate) fn tool_use() -> ToolUseContent {
    ToolUseContent {
        id: "call_1".into(),
        name: "get_weather".into(),
        input: obj(json!({ "city": "Paris" })),
        meta: Some(meta()),
        ..ToolUseContent::default()
    }
}

pub(crate) fn tool_result() -> ToolResultContent {
    ToolResultContent {
        tool_use_id: "call_1".into(),
        content: vec![text().into(), image().into()],
        structured_content: Some(json!({ "temperature": 18 })),
        is_error: Some(false),
        meta: Some(meta()),
        ..ToolResultContent::default()
    }
}

pub(crate) fn string_schema() -> StringSchema {
    StringSchema {
        title: Some("Email".into()),
        description: Some("Your email".into()),
        min_length: Some(3),
        max_length: Some(50),
        format: Some(StringFormat::Email),
        default: Some("me@example.com".into()),
        ..StringSchema::default()
    }
}

pub(crate) fn number_schema() -> NumberSchema {
    NumberSchema {
        kind: NumberType::Integer,
        title: Some("Age".into()),
        description: Some("Your age".into()),
        minimum: Some(18.into()),
        maximum: Some(150.into()),
        default: Some(30.into()),
        ..NumberSchema::default()
    }
}

pub(crate) fn boolean_schema() -> BooleanSchema {
    BooleanSchema {
        title: Some("Subscribe".into()),
        description: Some("Get the newsletter".into()),
        default: Some(false),
        ..BooleanSchema::default()
    }
}

pub(crate) fn option(value: &str, title: &str) -> EnumOption {
    EnumOption {
        value: value.into(),
        title: title.into(),
        ..EnumOption::default()
    }
}

pub(crate) fn untitled_single() -> UntitledSingleSelectEnumSchema {
    UntitledSingleSelectEnumSchema {
        title: Some("Color".into()),
        description: Some("Pick one".into()),
        values: vec!["Red".into(), "Green".into()],
        default: Some("Red".into()),
        ..UntitledSingleSelectEnumSchema::default()
    }
}

pub(crate) fn titled_single() -> TitledSingleSelectEnumSchema {
    TitledSingleSelectEnumSchema {
        title: Some("Color".into()),
        description: Some("Pick one".into()),
        one_of: vec![option("#f00", "Red"), option("#0f0", "Green")],
        default: Some("#f00".into()),
        ..TitledSingleSelectEnumSchema::default()
    }
}

pub(crate) fn untitled_multi() -> UntitledMultiSelectEnumSchema {
    UntitledMultiSelectEnumSchema {
        title: Some("Colors".into()),
        description: Some("Pick some".into()),
        min_items: Some(1),
        max_items: Some(2),
        items: UntitledEnumItems {
            values: vec!["Red".into(), "Green".into(), "Blue".into()],
            ..UntitledEnumItems::default()
        },
        default: Some(vec!["Red".into()]),
        ..UntitledMultiSelectEnumSchema::default()
    }
}

pub(crate) fn titled_multi() -> TitledMultiSelectEnumSchema {
    TitledMultiSelectEnumSchema {
        title: Some("Colors".into()),
        description: Some("Pick some".into()),
        min_items: Some(1),
        max_items: Some(2),
        items: TitledEnumItems {
            any_of: vec![option("#f00", "Red"), option("#00f", "Blue")],
            ..TitledEnumItems::default()
        },
        default: Some(vec!["#f00".into()]),
        ..TitledMultiSelectEnumSchema::default()
    }
}

pub(crate) fn legacy_enum() -> LegacyTitledEnumSchema {
    LegacyTitledEnumSchema {
        title: Some("Size".into()),
        description: Some("Pick a size".into()),
        values: vec!["s".into(), "m".into()],
        enum_names: Some(vec!["Small".into(), "Medium".into()]),
        default: Some("m".into()),
        ..LegacyTitledEnumSchema::default()
    }
}

pub(crate) fn form_params() -> ElicitRequestFormParams {
    use PrimitiveSchemaDefinition as P;
    ElicitRequestFormParams {
        mode: Some(tags::FormModeTag),
        message: "Tell us about you".into(),
        requested_schema: RequestedSchema {
            schema: Some("https://json-schema.org/draft/2020-12/schema".into()),
            properties: vec![
                ("email".into(), P::String(string_schema())),
                ("age".into(), P::Number(number_schema())),
                ("news".into(), P::Boolean(boolean_schema())),
                (
                    "color".into(),
                    P::UntitledSingleSelectEnum(untitled_single()),
                ),
                ("hex".into(), P::TitledSingleSelectEnum(titled_single())),
                (
                    "colors".into(),
                    P::UntitledMultiSelectEnum(untitled_multi()),
                ),
                ("hexes".into(), P::TitledMultiSelectEnum(titled_multi())),
                ("size".into(), P::LegacyTitledEnum(legacy_enum())),
            ],
            required: Some(vec!["email".into()]),
            ..RequestedSchema::default()
        },
        meta: Some(meta()),
        ..ElicitRequestFormParams::default()
    }
}

pub(crate) fn url_params() -> ElicitRequestUrlParams {
    ElicitRequestUrlParams {
        message: "Please sign in".into(),
        url: "https://example.com/login".into(),
        elicitation_id: Some("el-1".into()),
        meta: Some(meta()),
        ..ElicitRequestUrlParams::default()
    }
}

pub(crate) fn elicit_result() -> ElicitResult {
    ElicitResult {
        content: Some(BTreeMap::from([
            ("email".into(), ElicitValue::String("me@example.com".into())),
            ("age".into(), ElicitValue::Integer(30)),
            ("news".into(), ElicitValue::Boolean(true)),
            (
                "colors".into(),
                ElicitValue::StringArray(vec!["Red".into(), "Blue".into()]),
            ),
        ])),
        meta: Some(meta()),
        ..ElicitResult::new(ElicitAction::Accept)
    }
}

pub(crate) fn sampling_message() -> SamplingMessage {
    SamplingMessage {
        meta: Some(meta()),
        ..SamplingMessage::new(Role::User, text())
    }
}

pub(crate) fn create_message_params() -> CreateMessageRequestParams {
    CreateMessageRequestParams {
        messages: vec![
            sampling_message(),
            SamplingMessage::new(
                Role::Assistant,
                SamplingContent::Multiple(vec![tool_use().into(), tool_use().into()]),
            ),
            SamplingMessage::new(Role::User, tool_result()),
            SamplingMessage::new(Role::User, SamplingMessageContentBlock::Audio(audio())),
        ],
        model_preferences: Some(model_preferences()),
        system_prompt: Some("Be brief.".into()),
        include_context: Some(IncludeContext::ThisServer),
        temperature: Some(num(0.7)),
        max_tokens: 100,
        stop_sequences: Some(vec!["\n\n".into()]),
        metadata: Some(obj(json!({ "provider": { "k": 1 } }))),
        tools: Some(vec![tool()]),
        tool_choice: Some(ToolChoice {
            mode: Some(ToolChoiceMode::Auto),
            ..ToolChoice::default()
        }),
        meta: Some(meta()),
        ..CreateMessageRequestParams::default()
    }
}

pub(crate) fn model_preferences() -> ModelPreferences {
    ModelPreferences {
        hints: Some(vec![ModelHint {
            name: Some("claude-3-sonnet".into()),
            ..ModelHint::default()
        }]),
        cost_priority: Some(num(0.3)),
        speed_priority: Some(1.into()),
        intelligence_priority: Some(0.into()),
        ..ModelPreferences::default()
    }
}

pub(crate) fn create_message_result() -> CreateMessageResult {
    CreateMessageResult {
        role: Role::Assistant,
        content: SamplingContent::Multiple(vec![text().into(), tool_use().into()]),
        model: "claude-3-sonnet-20240307".into(),
        stop_reason: Some(StopReason::ToolUse),
        meta: Some(meta()),
        extra: JsonObject::new(),
    }
}

pub(crate) fn root() -> Root {
    Root {
        uri: "file:///home/user/project".into(),
        name: Some("Project".into()),
        meta: Some(meta()),
        ..Root::default()
    }
}

pub(crate) fn complete_params() -> CompleteRequestParams {
    CompleteRequestParams {
        reference: CompletionReference::Prompt(PromptReference {
            name: "code_review".into(),
            title: Some("Code review".into()),
            ..PromptReference::default()
        }),
        argument: CompletionArgument {
            name: "language".into(),
            value: "py".into(),
            ..CompletionArgument::default()
        },
        context: Some(CompletionContext {
            arguments: Some(BTreeMap::from([("framework".into(), "flask".into())])),
            ..CompletionContext::default()
        }),
        meta: Some(meta()),
        extra: JsonObject::new(),
    }
}

pub(crate) fn complete_result() -> CompleteResult {
    CompleteResult {
        completion: Completion {
            values: vec!["python".into(), "pytorch".into()],
            total: Some(10),
            has_more: Some(true),
            ..Completion::default()
        },
        meta: Some(meta()),
        ..CompleteResult::default()
    }
}

pub(crate) fn call_tool_params() -> CallToolRequestParams {
    CallToolRequestParams {
        name: "get_weather".into(),
        arguments: Some(obj(json!({ "city": "Paris", "days": [1, 2] }))),
        meta: Some(meta()),
        ..CallToolRequestParams::default()
    }
}

pub(crate) fn call_tool_result() -> CallToolResult {
    CallToolResult {
        content: vec![
            text().into(),
            image().into(),
            audio().into(),
            resource_link().into(),
            embedded().into(),
        ],
        structured_content: Some(json!({ "temperature": 22.5 })),
        is_error: Some(false),
        meta: Some(meta()),
        ..CallToolResult::default()
    }
}

pub(crate) fn list_tools_result() -> ListToolsResult {
    ListToolsResult {
        tools: vec![tool(), Tool::new("no_args")],
        next_cursor: Some("page-2".into()),
        meta: Some(meta()),
        ..ListToolsResult::default()
    }
}

pub(crate) fn list_resources_result() -> ListResourcesResult {
    ListResourcesResult {
        resources: vec![resource()],
        next_cursor: Some("page-2".into()),
        meta: Some(meta()),
        ..ListResourcesResult::default()
    }
}

pub(crate) fn list_templates_result() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult {
        resource_templates: vec![resource_template()],
        next_cursor: Some("page-2".into()),
        meta: Some(meta()),
        ..ListResourceTemplatesResult::default()
    }
}

pub(crate) fn read_resource_params() -> ReadResourceRequestParams {
    ReadResourceRequestParams {
        uri: "file:///project/README.md".into(),
        meta: Some(meta()),
        ..ReadResourceRequestParams::default()
    }
}

pub(crate) fn read_resource_result() -> ReadResourceResult {
    ReadResourceResult {
        contents: vec![text_contents().into(), blob_contents().into()],
        meta: Some(meta()),
        ..ReadResourceResult::default()
    }
}

pub(crate) fn list_prompts_result() -> ListPromptsResult {
    ListPromptsResult {
        prompts: vec![prompt()],
        next_cursor: Some("page-2".into()),
        meta: Some(meta()),
        ..ListPromptsResult::default()
    }
}

pub(crate) fn get_prompt_params() -> GetPromptRequestParams {
    GetPromptRequestParams {
        name: "code_review".into(),
        arguments: Some(BTreeMap::from([("code".into(), "fn main() {}".into())])),
        meta: Some(meta()),
        ..GetPromptRequestParams::default()
    }
}

pub(crate) fn get_prompt_result() -> GetPromptResult {
    GetPromptResult {
        description: Some("A review".into()),
        messages: vec![
            PromptMessage::new(Role::User, text()),
            PromptMessage::new(Role::Assistant, image()),
            PromptMessage::new(Role::User, audio()),
            PromptMessage::new(Role::User, resource_link()),
            PromptMessage::new(Role::User, embedded()),
        ],
        meta: Some(meta()),
        ..GetPromptResult::default()
    }
}

pub(crate) fn initialize_params() -> InitializeRequestParams {
    InitializeRequestParams {
        protocol_version: ProtocolVersion::LATEST_LEGACY.as_str().into(),
        capabilities: client_capabilities(),
        client_info: implementation(),
        meta: Some(meta()),
        ..InitializeRequestParams::default()
    }
}

pub(crate) fn initialize_result() -> InitializeResult {
    InitializeResult {
        protocol_version: ProtocolVersion::LATEST_LEGACY.as_str().into(),
        capabilities: server_capabilities(),
        server_info: implementation(),
        instructions: Some("Use get_weather.".into()),
        meta: Some(meta()),
        ..InitializeResult::default()
    }
}

pub(crate) fn request_params() -> RequestParams {
    RequestParams {
        meta: Some(meta()),
        ..RequestParams::default()
    }
}

pub(crate) fn notification_params() -> NotificationParams {
    NotificationParams {
        meta: Some(obj(json!({ "com.example/n": 1 }))),
        ..NotificationParams::default()
    }
}

pub(crate) fn paginated() -> PaginatedRequestParams {
    PaginatedRequestParams {
        cursor: Some("page-2".into()),
        meta: Some(meta()),
        ..PaginatedRequestParams::default()
    }
}

pub(crate) fn progress_params() -> ProgressNotificationParams {
    ProgressNotificationParams {
        message: Some("Halfway".into()),
        meta: Some(meta()),
        ..ProgressNotificationParams::new("tok-1", 50, Some(100))
    }
}

pub(crate) fn cancelled_params() -> CancelledNotificationParams {
    CancelledNotificationParams {
        meta: Some(meta()),
        ..CancelledNotificationParams::new(42, Some("User requested".into()))
    }
}

pub(crate) fn logging_params() -> LoggingMessageNotificationParams {
    LoggingMessageNotificationParams {
        level: LoggingLevel::Error,
        logger: Some("database".into()),
        data: json!({ "error": "Connection failed", "port": 5432 }),
        meta: Some(meta()),
        extra: JsonObject::new(),
    }
}

pub(crate) fn empty_result() -> EmptyResult {
    EmptyResult {
        meta: Some(meta()),
        ..EmptyResult::default()
    }
}

pub(crate) fn req<R: RequestKind>(id: i64, params: R::Params) -> JsonRpcRequest<R> {
    JsonRpcRequest::new(id, params)
}

pub(crate) fn note<N: NotificationKind>(params: N::Params) -> JsonRpcNotification<N> {
    JsonRpcNotification::new(params)
}
