//! The conformance "everything" server (the tools, resources and prompts the official
//! suite's server scenarios call), plus `echo(text)`,
//! `test_notify_session` (a log message not tied to the request, for the interop step) and
//! the two ledger tools of the fault-injection suite (`faults.rs`): `ledger_count` (numbered
//! progress on the request's stream) and `ledger_burst` (numbered log messages on the GET
//! stream).
//!
//! Every tool, resource and prompt the `@modelcontextprotocol/conformance` server suites
//! (0.1.16, and 0.2.0-alpha.12 for both 2025-11-25 and 2026-07-28) name, with the texts,
//! content types, timings (50 ms steps, on the transport's clock), progress, logging,
//! sampling and elicitation they check. The 2026-07-28 fixtures ask for input through the
//! same `RequestContext` calls as the others (`elicit_form`, `create_message`, `list_roots`),
//! which become the input requests of a multi-round-trip request for a 2026-07-28 client;
//! the trigger tools change the tool and prompt lists at runtime; `test_param_headers` has an
//! `x-mcp-header` argument. It also serves a skill (the Skills extension, [`pdf_skill`]) for
//! the suite's skills scenarios. Shared by both runtimes' `mcp-everything` binaries and by
//! the in-memory tests.

use std::time::Duration;

use mcp_service::schema::{
    CompletionReference, CreateMessageRequestParams, Elicit, ElicitRequestFormParams, ElicitResult,
    ElicitValue, JsonObject, ListRootsResult, LoggingLevel, RequestedSchema, SamplingContent,
    SamplingMessage, SamplingMessageContentBlock, TextContent,
};
use mcp_service::{
    CallToolResult, ContentBlock, Error, GetPromptResult, Prompt, PromptMessage, RequestContext,
    Resource, ResourceContents, ResourceTemplate, Role, Server, Skill, Tool, ToolArgs, ToolResult,
    description, required,
};
use serde_json::json;

/// A 1×1 PNG, base64.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV, base64.
pub const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// The input schema of `json_schema_2020_12_tool`, exactly as the suite expects it: `$schema`,
/// `$defs` with an `$anchor`, `$ref`, composition (`allOf`/`anyOf`), conditionals
/// (`if`/`then`/`else`) and `additionalProperties`.
pub const JSON_SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

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
                    "Sends progress 1..n (total n, message \"pid <the server's PID>\") on the request's stream, interval_ms apart, then returns \"counted n\"",
                )
                .integer("n", required().description("How many progress notifications"))
                .integer("interval_ms", description("The pause between two (default 5)")),
            |ctx, args: ToolArgs| async move {
                let n = u64::try_from(args.get_int("n", 0).clamp(0, 100_000)).unwrap_or(0);
                let pause = Duration::from_millis(
                    u64::try_from(args.get_int("interval_ms", 5).clamp(0, 10_000)).unwrap_or(5),
                );
                // The PID tells a multi-process test which instance runs the call.
                let pid = format!("pid {}", std::process::id());
                for k in 1..=n {
                    ctx.progress_message(k, Some(n), Some(pid.as_str()));
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
                    "Sends n log messages {burst, seq: 1..n, pid} not tied to the request (so on the GET stream), then returns",
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
                        json!({"burst": burst, "seq": seq, "pid": std::process::id()}),
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
        .tool(
            no_args(
                "test_trigger_tool_change",
                "Adds or removes the tool test_dynamic_tool (so the tool list changes)",
            ),
            |ctx, _| async move {
                let server = ctx.server();
                let now = if server.remove_tool(DYNAMIC_TOOL) {
                    "removed"
                } else {
                    server.add_tool(
                        no_args(DYNAMIC_TOOL, "Exists while test_trigger_tool_change says so"),
                        |_, _| async { Ok(CallToolResult::text("dynamic tool called")) },
                    );
                    "added"
                };
                Ok(CallToolResult::text(format!("{DYNAMIC_TOOL} {now}")))
            },
        )
        .tool(
            no_args(
                "test_trigger_prompt_change",
                "Adds or removes the prompt test_dynamic_prompt (so the prompt list changes)",
            ),
            |ctx, _| async move {
                let server = ctx.server();
                let now = if server.remove_prompt(DYNAMIC_PROMPT) {
                    "removed"
                } else {
                    server.add_prompt(
                        Prompt::new(DYNAMIC_PROMPT)
                            .description("Exists while test_trigger_prompt_change says so"),
                        |_, _| async { Ok(GetPromptResult::user_text("A dynamic prompt.")) },
                    );
                    "added"
                };
                Ok(CallToolResult::text(format!("{DYNAMIC_PROMPT} {now}")))
            },
        )
        .tool(
            Tool::new("test_param_headers")
                .description("Returns its region, which a 2026-07-28 client mirrors in the Mcp-Param-Region header")
                .string(
                    "region",
                    required()
                        .description("Any region name")
                        .keyword("x-mcp-header", "Region"),
                ),
            |_, args: ToolArgs| async move {
                Ok(CallToolResult::text(format!("region={}", args.get_string("region", ""))))
            },
        )
        .tool(
            no_args(
                "test_logging_tool",
                "Logs two messages at info (a 2026-07-28 client gets them only when its _meta sets a log level)",
            ),
            |ctx, _| async move {
                ctx.info("Logging tool started");
                ctx.info("Logging tool finished");
                Ok(CallToolResult::text("Logging evaluated"))
            },
        )
        .tool(
            no_args(
                "test_streaming_elicitation",
                "Reports progress, then asks the user to confirm (on the request's own stream)",
            ),
            |ctx, _| async move {
                ctx.progress(50, Some(100));
                let answer = elicit_fields(&ctx, "Continue the stream?", json!({"ok": {"type": "boolean"}})).await?;
                ctx.progress(100, Some(100));
                Ok(CallToolResult::text(format!("Streaming complete: {}", describe(&answer))))
            },
        )
        .tool(
            no_args(
                "test_missing_capability",
                "Needs the client's sampling capability (asks its model one question)",
            ),
            |ctx, _| async move {
                let text = sample(&ctx, "Say hello", 20).await?;
                Ok(CallToolResult::text(format!("Success: {text}")))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_elicitation",
                "Asks the user's name (an input request in 2026-07-28), then greets them",
            ),
            |ctx, _| async move {
                let answer = elicit_fields_as(
                    &ctx,
                    "user_name",
                    "What is your name?",
                    json!({"name": {"type": "string"}}),
                )
                .await?;
                Ok(CallToolResult::text(format!("Hello, {}!", field(&answer, "name"))))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_sampling",
                "Asks the client's model a question (an input request in 2026-07-28)",
            ),
            |ctx, _| async move {
                let text = sample(&ctx, "What is the capital of France?", 100).await?;
                Ok(CallToolResult::text(format!("LLM response: {text}")))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_list_roots",
                "Asks the client for its roots (an input request in 2026-07-28) and lists them",
            ),
            |ctx, _| async move {
                let roots = ctx.list_roots().await?;
                Ok(CallToolResult::text(format!("Roots: {}", roots_text(&roots))))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_request_state",
                "Asks for a confirmation, carrying its progress in requestState (2026-07-28)",
            ),
            |ctx, _| async move {
                let answer = elicit_fields(&ctx, "Please confirm", json!({"ok": {"type": "boolean"}})).await?;
                Ok(CallToolResult::text(format!("state-ok: {}", describe(&answer))))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_multiple_inputs",
                "Asks for a name, a model's greeting and the roots at once (one round in 2026-07-28)",
            ),
            |ctx, _| async move {
                let (name, (greeting, roots)) = smol::future::zip(
                    elicit_fields(&ctx, "What is your name?", json!({"name": {"type": "string"}})),
                    smol::future::zip(sample(&ctx, "Generate a greeting", 50), ctx.list_roots()),
                )
                .await;
                let (name, greeting, roots) = (name?, greeting?, roots?);
                Ok(CallToolResult::text(format!(
                    "name={}, greeting={greeting}, roots={}",
                    field(&name, "name"),
                    roots_text(&roots)
                )))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_multi_round",
                "Asks a name, then a favourite colour (two rounds in 2026-07-28)",
            ),
            |ctx, _| async move {
                let name = elicit_fields(&ctx, "Step 1: What is your name?", json!({"name": {"type": "string"}})).await?;
                let color = elicit_fields(
                    &ctx,
                    "Step 2: What is your favorite color?",
                    json!({"color": {"type": "string"}}),
                )
                .await?;
                Ok(CallToolResult::text(format!(
                    "{} likes {}",
                    field(&name, "name"),
                    field(&color, "color")
                )))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_tampered_state",
                "Asks for a confirmation; a retry whose requestState was altered is refused",
            ),
            |ctx, _| async move {
                let answer = elicit_fields(&ctx, "Please confirm", json!({"ok": {"type": "boolean"}})).await?;
                Ok(CallToolResult::text(format!("integrity-ok: {}", describe(&answer))))
            },
        )
        .tool(
            no_args(
                "test_input_required_result_capabilities",
                "Asks for input only through the capabilities the client declared (elicitation, sampling)",
            ),
            capabilities_tool,
        )
        // The Tasks extension's fixtures (SEP-2663; the suite's `tasks-*` scenarios).
        .tasks(mcp_service::TaskConfig::default())
        .tool(
            Tool::new("greet")
                .description("Greets someone at once (never a task)")
                .string("name", required().description("Who to greet")),
            |_ctx, args: ToolArgs| async move {
                Ok(CallToolResult::text(format!("Hello, {}!", args.get_string("name", "World"))))
            },
        )
        .task_tool(
            Tool::new("slow_compute")
                .description("Works for `seconds` seconds, as a task for clients that take tasks")
                .number("seconds", required().description("How long to work"))
                .string("label", description("A label echoed in the result")),
            |ctx, args: ToolArgs| async move {
                let seconds = args.get_f64("seconds", 0.0).clamp(0.0, 3600.0);
                let label = args.get_string("label", "");
                // `tasks/cancel` (or a cancelled call) drops this at the await.
                ctx.sleep(Duration::from_secs_f64(seconds)).await;
                Ok(CallToolResult::text(format!("Computed {label} in {seconds}s")))
            },
        )
        .task_tool(
            no_args("failing_job", "A job that always ends in a tool error after about a second")
                .task_support(mcp_service::schema::TaskSupport::Required),
            |ctx, _| async move {
                ctx.sleep(Duration::from_secs(1)).await;
                Ok(CallToolResult::error("the job failed: the input was rejected"))
            },
        )
        .task_tool(
            no_args("protocol_error_job", "A job that ends in a JSON-RPC error (the task fails)"),
            |ctx, _| async move {
                ctx.sleep(Duration::from_millis(200)).await;
                Err(Error::internal("the job's worker crashed"))
            },
        )
        .task_tool(
            Tool::new("confirm_delete")
                .description("Asks the user to confirm, then deletes (a task that needs input)")
                .string("filename", required().description("The file to delete")),
            |ctx, args: ToolArgs| async move {
                let file = args.get_string("filename", "");
                let answer =
                    elicit_fields(&ctx, &format!("Delete {file}?"), json!({"confirm": {"type": "boolean"}})).await?;
                Ok(CallToolResult::text(format!("{file}: {}", describe(&answer))))
            },
        )
        .task_tool(
            no_args("multi_input", "Asks two questions at once (two input requests outstanding)"),
            |ctx, _| async move {
                let (a, b) = smol::future::zip(
                    elicit_fields_as(&ctx, "first", "First name?", json!({"name": {"type": "string"}})),
                    elicit_fields_as(&ctx, "second", "Confirm?", json!({"confirm": {"type": "boolean"}})),
                )
                .await;
                Ok(CallToolResult::text(format!("first: {}; second: {}", describe(&a?), describe(&b?))))
            },
        )
        .tool(
            no_args(
                "test_tool_with_task",
                "Asks the user's name (an input request), then goes on as a task that greets them",
            )
            .task_support(mcp_service::schema::TaskSupport::Required),
            |ctx, _| async move {
                let answer =
                    elicit_fields_as(&ctx, "user_name", "What is your name?", json!({"name": {"type": "string"}}))
                        .await?;
                let name = field(&answer, "name");
                ctx.run_as_task(move |ctx| async move {
                    ctx.sleep(Duration::from_millis(100)).await;
                    Ok(CallToolResult::text(format!("Hello, {name}!")))
                })
                .await
            },
        )
        .prompt(
            Prompt::new("test_input_required_result_prompt")
                .description("A prompt that first asks the user for its context (an input request in 2026-07-28)"),
            |ctx, _| async move {
                let answer = elicit_fields(
                    &ctx,
                    "What context should the prompt use?",
                    json!({"context": {"type": "string"}}),
                )
                .await?;
                Ok(GetPromptResult::user_text(format!(
                    "Answer with this context in mind: {}",
                    field(&answer, "context")
                )))
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
        .skill(pdf_skill())
}

/// The skill the everything server serves (the Skills extension): `pdf-processing`, with a
/// supporting file in a subdirectory (so `resources/directory/read` lists a directory). The
/// files are those of `tests/skills/pdf-processing`, compiled in.
pub fn pdf_skill() -> Skill {
    Skill::builder("pdf-processing")
        .file(
            "SKILL.md",
            include_str!("../skills/pdf-processing/SKILL.md"),
        )
        .file(
            "references/FORMS.md",
            include_str!("../skills/pdf-processing/references/FORMS.md"),
        )
        .file(
            "scripts/extract.py",
            include_str!("../skills/pdf-processing/scripts/extract.py"),
        )
        .build()
        .expect("the bundled skill is valid (checked by the tests)")
}

/// The tool `test_trigger_tool_change` adds and removes.
pub const DYNAMIC_TOOL: &str = "test_dynamic_tool";
/// The prompt `test_trigger_prompt_change` adds and removes.
pub const DYNAMIC_PROMPT: &str = "test_dynamic_prompt";

/// Asks the user for a form of the given string/boolean `properties`, all required. In
/// 2026-07-28 this is an input request of an MRTR round; before, an `elicitation/create`.
async fn elicit_fields(
    ctx: &RequestContext,
    message: &str,
    properties: serde_json::Value,
) -> Result<ElicitResult, Error> {
    ctx.elicit_form(message, form(properties)?).await
}

/// [`elicit_fields`] under the input key `key` (its name in a modern client's
/// `inputRequests`).
async fn elicit_fields_as(
    ctx: &RequestContext,
    key: &str,
    message: &str,
    properties: serde_json::Value,
) -> Result<ElicitResult, Error> {
    let params = ElicitRequestFormParams {
        message: message.to_owned(),
        requested_schema: form(properties)?,
        ..ElicitRequestFormParams::default()
    };
    ctx.send_request_keyed::<Elicit>(key, params.into()).await
}

/// A form whose every field is required.
fn form(properties: serde_json::Value) -> Result<RequestedSchema, Error> {
    let required: Vec<String> = properties
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    Ok(serde_json::from_value(json!({
        "type": "object",
        "properties": properties,
        "required": required,
    }))?)
}

/// One field of an accepted form, as text (`"?"` when absent).
fn field(answer: &ElicitResult, name: &str) -> String {
    match answer.content.as_ref().and_then(|c| c.get(name)) {
        Some(ElicitValue::String(s)) => s.clone(),
        Some(other) => serde_json::to_string(other).unwrap_or_default(),
        None => "?".to_owned(),
    }
}

/// What the user did with a form, and what they filled in.
fn describe(answer: &ElicitResult) -> String {
    let action = serde_json::to_value(answer.action).unwrap_or_default();
    let content = serde_json::to_string(&answer.content).unwrap_or_default();
    format!(
        "action={}, content={content}",
        action.as_str().unwrap_or_default()
    )
}

/// Asks the client's model `prompt`; the text it answered (or its content as JSON).
async fn sample(ctx: &RequestContext, prompt: &str, max_tokens: u64) -> Result<String, Error> {
    let result = ctx
        .create_message(CreateMessageRequestParams {
            messages: vec![SamplingMessage::new(Role::User, TextContent::new(prompt))],
            max_tokens,
            ..CreateMessageRequestParams::default()
        })
        .await?;
    Ok(match &result.content {
        SamplingContent::Single(SamplingMessageContentBlock::Text(t)) => t.text.clone(),
        other => serde_json::to_string(other)?,
    })
}

/// The URIs of `roots`, comma-separated.
fn roots_text(roots: &ListRootsResult) -> String {
    roots
        .roots
        .iter()
        .map(|r| r.uri.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `test_input_required_result_capabilities`: an elicitation when the client declared
/// `elicitation`, a sampling request when it declared `sampling` (both at once when both),
/// nothing asked when neither.
async fn capabilities_tool(ctx: RequestContext, _: ToolArgs) -> ToolResult {
    let caps = ctx.client_capabilities().unwrap_or_default();
    let (elicit, sampled) = smol::future::zip(
        async {
            match caps.elicitation {
                Some(_) => elicit_fields(
                    &ctx,
                    "Elicitation input",
                    json!({"value": {"type": "string"}}),
                )
                .await
                .map(Some),
                None => Ok(None),
            }
        },
        async {
            match caps.sampling {
                Some(_) => sample(&ctx, "Sample request", 50).await.map(Some),
                None => Ok(None),
            }
        },
    )
    .await;
    let (elicit, sampled) = (elicit?, sampled?);
    if elicit.is_none() && sampled.is_none() {
        return Ok(CallToolResult::text("No supported capabilities declared"));
    }
    let mut got = Vec::new();
    if let Some(answer) = elicit {
        got.push(format!("elicitation ({})", describe(&answer)));
    }
    if let Some(text) = sampled {
        got.push(format!("sampling ({text})"));
    }
    Ok(CallToolResult::text(format!(
        "capabilities-ok: {}",
        got.join(", ")
    )))
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
    let text = sample(&ctx, &args.get_string("prompt", ""), 100).await?;
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
