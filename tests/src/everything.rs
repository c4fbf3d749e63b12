//! The conformance "everything" server (the tools, resources and prompts the official
//! suite's server scenarios call), plus `echo(text)`,
//! `test_notify_session` (a log message not tied to the request, for the interop step) and
//! the two ledger tools of the fault-injection suite (`faults.rs`): `ledger_count` (numbered
//! progress on the request's stream) and `ledger_burst` (numbered log messages on the GET
//! stream).
//!
//! Every tool, resource and prompt the `@modelcontextprotocol/conformance` 0.1.16 server
//! suite names, with the texts, content types, timings (50 ms steps, on the transport's
//! clock), progress, logging, sampling and elicitation it checks. Shared by both runtimes'
//! `mcp-everything` binaries and by the in-memory tests.

use std::time::Duration;

use mcp_proto::schema::{
    CompletionReference, CreateMessageRequestParams, JsonObject, LoggingLevel, RequestedSchema,
    SamplingContent, SamplingMessage, SamplingMessageContentBlock, TextContent,
};
use mcp_proto::service::{
    CallToolResult, ContentBlock, Error, GetPromptResult, Prompt, PromptMessage, RequestContext,
    Resource, ResourceContents, ResourceTemplate, Role, Server, Tool, ToolArgs, ToolResult,
    description, required,
};
use serde_json::json;

/// A 1×1 PNG, base64.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV, base64.
pub const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// The input schema of `json_schema_2020_12_tool`, exactly as the suite expects it.
pub const JSON_SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}"##;

/// The step between the logging and progress tool's messages.
pub const STEP: Duration = Duration::from_millis(50);

/// The completion candidates for `test_prompt_with_arguments`' arguments.
pub const COMPLETIONS: [&str; 3] = ["testValue1", "testValue2", "other"];

fn no_args(name: &str, text: &str) -> Tool {
    Tool::new(name).description(text)
}

/// The everything server.
pub fn server() -> Server {
    Server::new("mcp-everything", env!("CARGO_PKG_VERSION"))
        .instructions("The MCP conformance test server: every tool, resource and prompt the suite checks.")
        .tool(
            Tool::new("echo")
                .description("Returns its text")
                .string("text", required().description("The text to return")),
            |_ctx, args: ToolArgs| async move { Ok(CallToolResult::text(args.get_string("text", ""))) },
        )
        .tool(
            no_args(
                "test_notify_session",
                "Sends a log message not tied to the request (so on the GET stream)",
            ),
            |ctx, _| async move {
                ctx.session().log(
                    LoggingLevel::Info,
                    Some("interop"),
                    json!("notification on the GET stream"),
                );
                Ok(CallToolResult::text("notification sent"))
            },
        )
        .tool(
            Tool::new("ledger_count")
                .description(
                    "Sends progress 1..n (total n) on the request's stream, interval_ms apart, then returns \"counted n\"",
                )
                .integer("n", required().description("How many progress notifications"))
                .integer("interval_ms", description("The pause between two (default 5)")),
            |ctx, args: ToolArgs| async move {
                let n = u64::try_from(args.get_int("n", 0).clamp(0, 100_000)).unwrap_or(0);
                let pause = Duration::from_millis(
                    u64::try_from(args.get_int("interval_ms", 5).clamp(0, 10_000)).unwrap_or(5),
                );
                for k in 1..=n {
                    ctx.progress(k, Some(n));
                    if !pause.is_zero() && k < n {
                        ctx.sleep(pause).await;
                    }
                }
                Ok(CallToolResult::text(format!("counted {n}")))
            },
        )
        .tool(
            Tool::new("ledger_burst")
                .description(
                    "Sends n log messages {burst, seq: 1..n} not tied to the request (so on the GET stream), then returns",
                )
                .integer("burst", required().description("The burst's number, echoed in each message"))
                .integer("n", required().description("How many messages"))
                .integer("interval_ms", description("The pause between two (default 0)")),
            |ctx, args: ToolArgs| async move {
                let burst = args.get_int("burst", 0);
                let n = args.get_int("n", 0).clamp(0, 100_000);
                let pause = Duration::from_millis(
                    u64::try_from(args.get_int("interval_ms", 0).clamp(0, 10_000)).unwrap_or(0),
                );
                let session = ctx.session();
                for seq in 1..=n {
                    session.log(
                        LoggingLevel::Info,
                        Some("ledger"),
                        json!({"burst": burst, "seq": seq}),
                    );
                    if !pause.is_zero() && seq < n {
                        ctx.sleep(pause).await;
                    }
                }
                Ok(CallToolResult::text(format!("burst {burst} sent")))
            },
        )
        .tool(
            no_args("test_simple_text", "Returns a simple text response"),
            |_, _| async { Ok(CallToolResult::text("This is a simple text response for testing.")) },
        )
        .tool(
            no_args("test_image_content", "Returns an image"),
            |_, _| async { Ok(CallToolResult::new(vec![ContentBlock::image(PNG, "image/png")])) },
        )
        .tool(
            no_args("test_audio_content", "Returns audio"),
            |_, _| async { Ok(CallToolResult::new(vec![ContentBlock::audio(WAV, "audio/wav")])) },
        )
        .tool(
            no_args("test_embedded_resource", "Returns an embedded resource"),
            |_, _| async {
                Ok(CallToolResult::new(vec![ContentBlock::resource(
                    ResourceContents::text(
                        "test://embedded-resource",
                        "This is an embedded resource content.",
                    )
                    .with_mime_type("text/plain"),
                )]))
            },
        )
        .tool(
            no_args("test_multiple_content_types", "Returns text, an image and a resource"),
            |_, _| async {
                Ok(CallToolResult::new(vec![
                    ContentBlock::text("Multiple content types test:"),
                    ContentBlock::image(PNG, "image/png"),
                    ContentBlock::resource(
                        ResourceContents::text(
                            "test://mixed-content-resource",
                            r#"{"test":"data","value":123}"#,
                        )
                        .with_mime_type("application/json"),
                    ),
                ]))
            },
        )
        .tool(
            no_args("test_tool_with_logging", "Sends three log messages, 50 ms apart"),
            with_logging,
        )
        .tool(
            no_args("test_error_handling", "Always fails with a tool error"),
            |_, _| async { Err(Error::new("This tool intentionally returns an error for testing")) },
        )
        .tool(
            no_args("test_tool_with_progress", "Reports progress 0, 50, 100 of 100, 50 ms apart"),
            with_progress,
        )
        .tool(
            Tool::new("test_sampling")
                .description("Asks the client's model to answer the prompt")
                .string("prompt", required().description("The prompt for the model")),
            sampling,
        )
        .tool(
            Tool::new("test_elicitation")
                .description("Asks the user for a username and an email")
                .string("message", required().description("What to ask")),
            elicitation,
        )
        .tool(
            no_args(
                "test_elicitation_sep1034_defaults",
                "Asks the user a form whose fields have defaults (SEP-1034)",
            ),
            |ctx, _| {
                elicit_with(ctx, "Please review the defaults", json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "default": "John Doe"},
                        "age": {"type": "integer", "default": 30},
                        "score": {"type": "number", "default": 95.5},
                        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "default": true}
                    },
                    "required": []
                }))
            },
        )
        .tool(
            no_args(
                "test_elicitation_sep1330_enums",
                "Asks the user a form with every enum shape (SEP-1330)",
            ),
            |ctx, _| {
                elicit_with(ctx, "Please choose", json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"}
                        ]},
                        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"}
                        ]}}
                    },
                    "required": []
                }))
            },
        )
        .tool(
            Tool::with_schema("json_schema_2020_12_tool", json_schema_2020_12())
                .description("Has a JSON Schema 2020-12 input schema with $defs"),
            |_, args: ToolArgs| async move {
                Ok(CallToolResult::text(format!(
                    "Received: {}",
                    serde_json::Value::Object(args.into_object())
                )))
            },
        )
        .tool(
            no_args(
                "test_reconnection",
                "Closes its stream before answering, so the client resumes (SEP-1699)",
            ),
            |ctx: RequestContext, _| async move {
                // A transport that cannot close the stream answers on it normally.
                let _ = ctx.close_stream();
                ctx.sleep(2 * STEP).await;
                Ok(CallToolResult::text("Reconnection test completed"))
            },
        )
        .resource(
            Resource::new("test://static-text", "Static Text Resource")
                .title("Static text")
                .description("A static text resource")
                .mime_type("text/plain"),
            |_, req| async move {
                Ok(vec![ResourceContents::text(
                    req.uri,
                    "This is the content of the static text resource.",
                )
                .with_mime_type("text/plain")])
            },
        )
        .resource(
            Resource::new("test://static-binary", "Static Binary Resource")
                .title("Static binary")
                .description("A static PNG image")
                .mime_type("image/png"),
            |_, req| async move {
                Ok(vec![ResourceContents::blob(req.uri, PNG).with_mime_type("image/png")])
            },
        )
        .resource(
            Resource::new("test://watched-resource", "Watched Resource")
                .title("Watched")
                .description("A resource to subscribe to")
                .mime_type("text/plain"),
            |_, req| async move {
                Ok(vec![ResourceContents::text(req.uri, "Watched resource content")
                    .with_mime_type("text/plain")])
            },
        )
        .resource_template(
            ResourceTemplate::new("test://template/{id}/data", "Template Resource")
                .description("Data for any id")
                .mime_type("application/json"),
            |_, req| async move {
                let id = req.param("id").unwrap_or_default().to_owned();
                let text = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                Ok(vec![ResourceContents::text(req.uri, text.to_string())
                    .with_mime_type("application/json")])
            },
        )
        .prompt(
            Prompt::new("test_simple_prompt").description("A prompt without arguments"),
            |_, _| async { Ok(GetPromptResult::user_text("This is a simple prompt for testing.")) },
        )
        .prompt(
            Prompt::new("test_prompt_with_arguments")
                .description("A prompt with two arguments")
                .argument("arg1", "First argument", true)
                .argument("arg2", "Second argument", true),
            |_, args| async move {
                Ok(GetPromptResult::user_text(format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    args.get_string("arg1", ""),
                    args.get_string("arg2", "")
                )))
            },
        )
        .prompt(
            Prompt::new("test_prompt_with_embedded_resource")
                .description("A prompt that embeds a resource")
                .argument("resourceUri", "The URI of the resource to embed", true),
            |_, args| async move {
                let uri = args.get_string("resourceUri", "");
                Ok(GetPromptResult::new(vec![
                    PromptMessage::new(
                        Role::User,
                        ContentBlock::resource(
                            ResourceContents::text(uri, "Embedded resource content for testing.")
                                .with_mime_type("text/plain"),
                        ),
                    ),
                    PromptMessage::new(
                        Role::User,
                        ContentBlock::text("Please process the embedded resource above."),
                    ),
                ]))
            },
        )
        .prompt(
            Prompt::new("test_prompt_with_image").description("A prompt with an image"),
            |_, _| async {
                Ok(GetPromptResult::new(vec![
                    PromptMessage::new(Role::User, ContentBlock::image(PNG, "image/png")),
                    PromptMessage::new(Role::User, ContentBlock::text("Please analyze the image above.")),
                ]))
            },
        )
        .completion(|_, params| async move {
            let values = match &params.reference {
                CompletionReference::Prompt(p) if p.name == "test_prompt_with_arguments" => COMPLETIONS
                    .iter()
                    .filter(|v| v.starts_with(params.argument.value.as_str()))
                    .map(|v| (*v).to_owned())
                    .collect(),
                _ => Vec::new(),
            };
            Ok(values)
        })
}

/// The input schema of `json_schema_2020_12_tool`.
pub fn json_schema_2020_12() -> JsonObject {
    serde_json::from_str(JSON_SCHEMA_2020_12).unwrap_or_default()
}

async fn with_logging(ctx: RequestContext, _: ToolArgs) -> ToolResult {
    ctx.info("Tool execution started");
    ctx.sleep(STEP).await;
    ctx.info("Tool processing data");
    ctx.sleep(STEP).await;
    ctx.info("Tool execution completed");
    Ok(CallToolResult::text("Logging test completed"))
}

async fn with_progress(ctx: RequestContext, _: ToolArgs) -> ToolResult {
    ctx.progress(0, Some(100));
    ctx.sleep(STEP).await;
    ctx.progress(50, Some(100));
    ctx.sleep(STEP).await;
    ctx.progress(100, Some(100));
    Ok(CallToolResult::text("Progress test completed"))
}

async fn sampling(ctx: RequestContext, args: ToolArgs) -> ToolResult {
    let prompt = args.get_string("prompt", "");
    let result = ctx
        .create_message(CreateMessageRequestParams {
            messages: vec![SamplingMessage::new(Role::User, TextContent::new(prompt))],
            max_tokens: 100,
            ..CreateMessageRequestParams::default()
        })
        .await?;
    let text = match &result.content {
        SamplingContent::Single(SamplingMessageContentBlock::Text(t)) => t.text.clone(),
        other => serde_json::to_string(other)?,
    };
    Ok(CallToolResult::text(format!("LLM response: {text}")))
}

async fn elicitation(ctx: RequestContext, args: ToolArgs) -> ToolResult {
    let message = args.get_string("message", "");
    elicit_with(
        ctx,
        &message,
        json!({
            "type": "object",
            "properties": {"username": {"type": "string"}, "email": {"type": "string"}},
            "required": ["username", "email"]
        }),
    )
    .await
}

fn elicit_with(
    ctx: RequestContext,
    message: &str,
    schema: serde_json::Value,
) -> impl std::future::Future<Output = ToolResult> + Send + 'static {
    let message = message.to_owned();
    async move {
        let schema: RequestedSchema = serde_json::from_value(schema)?;
        let result = ctx.elicit_form(message, schema).await?;
        let action = serde_json::to_value(result.action)?;
        let content = serde_json::to_string(&result.content)?;
        Ok(CallToolResult::text(format!(
            "User response: action={}, content={content}",
            action.as_str().unwrap_or_default()
        )))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_tool_and_prompt_has_a_description() {
        let server = super::server();
        for tool in server.tools() {
            assert!(
                tool.description.is_some_and(|d| !d.is_empty()),
                "{}",
                tool.name
            );
        }
    }
}
