//! Typed tools and prompts (`mcp_service::typed`): the schemas generated from Rust
//! types, typed calls end to end through the in-memory pair, bad arguments reported exactly as
//! for hand-written tools, typed output (`outputSchema`, `structuredContent` and the text
//! fallback), typed prompt arguments, and the generated definitions valid under the spec's
//! own JSON Schemas.

mod schema_support;

use mcp_proto::jsonrpc::error_codes;
use mcp_service::client::Client;
use mcp_service::{
    CallToolResult, Error, GetPromptResult, Json, JsonSchema, Prompt, RequestContext, Server, Tool,
    ToolArgs, ToolResult, required, schemars,
};
use mcp_tests::harness::pair;
use schema_support::{Revision, spec_data};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How to add: the struct's own doc, which the schema leaves out.
#[derive(Debug, Deserialize, JsonSchema)]
struct AddArgs {
    /// The first addend
    a: f64,
    /// The second addend
    b: f64,
    /// How many digits to round to
    digits: Option<u8>,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Sum {
    /// a + b
    sum: f64,
    /// The expression computed
    expression: String,
}

async fn add(_ctx: RequestContext, args: AddArgs) -> ToolResult<Json<Sum>> {
    let mut sum = args.a + args.b;
    if let Some(d) = args.digits {
        let scale = 10f64.powi(i32::from(d));
        sum = (sum * scale).round() / scale;
    }
    Ok(Json(Sum {
        sum,
        expression: format!("{} + {}", args.a, args.b),
    }))
}

/// A kind of address, one of a closed list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Home,
    Work,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Address {
    /// The street and number
    street: String,
    kind: Kind,
}

/// Every shape a field can have.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Everything {
    /// A name
    name: String,
    /// A count
    count: u32,
    /// An optional note
    note: Option<String>,
    /// Ten unless given
    #[serde(default = "ten")]
    limit: i64,
    tags: Vec<String>,
    address: Address,
    extra: Value,
}

fn ten() -> i64 {
    10
}

/// A recursive type: its schema needs a `$ref`, kept with `$defs`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Node {
    label: String,
    children: Vec<Node>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct TreeArgs {
    /// The tree to count
    tree: Node,
}

fn calculator() -> Server {
    Server::new("calculator", "1.0.0")
        .typed_tool(Tool::new("add").description("Adds two numbers"), add)
        .typed_tool(
            Tool::new("everything").description("Takes every shape"),
            |_ctx, args: Everything| async move {
                Ok(CallToolResult::text(format!(
                    "{} {} {:?} {} {:?} {} {:?}",
                    args.name,
                    args.count,
                    args.note,
                    args.limit,
                    args.tags,
                    args.address.street,
                    args.address.kind
                )))
            },
        )
        .typed_tool(
            Tool::new("count_nodes").description("Counts a tree's nodes"),
            |_ctx, args: TreeArgs| async move {
                fn count(n: &Node) -> usize {
                    1 + n.children.iter().map(count).sum::<usize>()
                }
                Ok(CallToolResult::text(count(&args.tree).to_string()))
            },
        )
}

fn tool(server: &Server, name: &str) -> Tool {
    server.tools().into_iter().find(|t| t.name == name).unwrap()
}

#[test]
fn generated_input_schemas_have_types_required_fields_and_doc_comment_descriptions() {
    let server = calculator();
    let add = tool(&server, "add");
    assert_eq!(add.description.as_deref(), Some("Adds two numbers"));
    assert_eq!(
        Tool::new("x").input_schema_from::<AddArgs>().input_schema,
        add.input_schema,
        "the builder method gives the schema typed_tool uses"
    );
    assert_eq!(
        Tool::new("x").output_schema_from::<Sum>().output_schema,
        add.output_schema
    );
    let schema = Value::Object(add.input_schema);
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "number", "format": "double", "description": "The first addend"},
                "b": {"type": "number", "format": "double", "description": "The second addend"},
                "digits": {
                    "type": ["integer", "null"],
                    "format": "uint8",
                    "minimum": 0,
                    "maximum": 255,
                    "description": "How many digits to round to"
                }
            },
            "required": ["a", "b"]
        })
    );

    let schema = Value::Object(tool(&server, "everything").input_schema);
    let props = &schema["properties"];
    assert_eq!(
        schema["required"],
        json!(["name", "count", "tags", "address", "extra"]),
        "non-Option fields without a default are required"
    );
    assert_eq!(props["name"]["type"], "string");
    assert_eq!(props["name"]["description"], "A name");
    assert_eq!(props["count"]["type"], "integer");
    assert_eq!(props["count"]["minimum"], 0);
    assert_eq!(props["note"]["type"], json!(["string", "null"]));
    assert_eq!(props["limit"]["default"], 10);
    assert_eq!(
        props["tags"],
        json!({"type": "array", "items": {"type": "string"}})
    );
    assert_eq!(
        props["extra"],
        json!({}),
        "a `true` schema is written as {{}}"
    );
    assert_eq!(schema["additionalProperties"], false, "deny_unknown_fields");
    // Nested types are inlined, with their own docs and required fields.
    assert_eq!(props["address"]["type"], "object");
    assert_eq!(
        props["address"]["properties"]["street"]["description"],
        "The street and number"
    );
    assert_eq!(props["address"]["required"], json!(["street", "kind"]));
    assert_eq!(
        props["address"]["properties"]["kind"]["enum"],
        json!(["home", "work"])
    );
    for key in ["$schema", "title", "description", "$defs"] {
        assert!(schema.get(key).is_none(), "{key} in {schema}");
    }

    // A recursive type is inlined once, and refers to its definition in `$defs` below.
    let schema = Value::Object(tool(&server, "count_nodes").input_schema);
    let tree = &schema["properties"]["tree"];
    assert_eq!(tree["type"], "object");
    assert_eq!(
        tree["properties"]["children"]["items"]["$ref"],
        "#/$defs/Node"
    );
    assert_eq!(
        schema["$defs"]["Node"]["properties"]["children"]["items"]["$ref"],
        "#/$defs/Node"
    );
    assert_eq!(
        schema["properties"]["tree"]["description"],
        "The tree to count"
    );
}

#[test]
fn a_typed_call_end_to_end_gets_structured_content_and_the_text_fallback() {
    let (exec, lb) = pair(&calculator(), Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let tools = client.list_tools().await.unwrap();
        let add = tools.iter().find(|t| t.name == "add").unwrap();
        assert_eq!(
            add.output_schema.clone().map(Value::Object),
            Some(json!({
                "type": "object",
                "properties": {
                    "sum": {"type": "number", "format": "double", "description": "a + b"},
                    "expression": {"type": "string", "description": "The expression computed"}
                },
                "required": ["sum", "expression"]
            }))
        );
        assert!(
            tools
                .iter()
                .filter(|t| t.name != "add")
                .all(|t| t.output_schema.is_none()),
            "a CallToolResult handler declares no output schema"
        );

        let r = client
            .call_tool("add", json!({"a": 1.25, "b": 2, "digits": 1}))
            .await
            .unwrap();
        assert_eq!(r.is_error, None, "{r:?}");
        let expected = json!({"sum": 3.3, "expression": "1.25 + 2"});
        assert_eq!(r.structured_content, Some(expected.clone()));
        assert_eq!(r.content.len(), 1, "one text block");
        let text: Value = serde_json::from_str(r.first_text().unwrap()).unwrap();
        assert_eq!(text, expected, "the text fallback is the same JSON");

        let r = client
            .call_tool(
                "everything",
                json!({"name": "n", "count": 3, "tags": ["x"], "extra": [1],
                       "address": {"street": "Main 1", "kind": "work"}}),
            )
            .await
            .unwrap();
        assert_eq!(
            r.first_text(),
            Some(r#"n 3 None 10 ["x"] Main 1 Work"#),
            "the schema's default filled in, the struct handed over: {r:?}"
        );

        let tree = json!({"tree": {"label": "r", "children": [
            {"label": "a", "children": []},
            {"label": "b", "children": [{"label": "c", "children": []}]}
        ]}});
        let r = client.call_tool("count_nodes", tree).await.unwrap();
        assert_eq!(r.first_text(), Some("4"));
    });
}

/// The same tool twice: a hand-written schema read with `args.parse`, and typed.
fn twins(validate: bool) -> Server {
    #[derive(Deserialize, JsonSchema)]
    struct Point {
        x: i32,
        y: u8,
    }
    Server::new("twins", "1")
        .validate_arguments(validate)
        .tool(
            Tool::new("point")
                .integer("x", required())
                .integer("y", required().min(0).max(255)),
            |_, args: ToolArgs| async move {
                let p: Point = args.parse()?;
                Ok(CallToolResult::text(format!("{} {}", p.x, p.y)))
            },
        )
        .typed_tool(Tool::new("typed_point"), |_, p: Point| async move {
            Ok(CallToolResult::text(format!("{} {}", p.x, p.y)))
        })
}

#[test]
fn bad_arguments_are_reported_as_for_hand_written_tools() {
    for validate in [true, false] {
        let (exec, lb) = pair(&twins(validate), Client::builder("t", "1"));
        let client = lb.client.clone();
        exec.block_on(async move {
            client.initialize().await.unwrap();
            for args in [
                json!({"x": 1, "y": 2}),
                json!({"x": "1", "y": 2}),
                json!({"y": 2}),
                json!({"x": 1, "y": 300}),
                json!({"x": 1.5, "y": -1}),
            ] {
                let hand = client.call_tool("point", &args).await.unwrap();
                let typed = client.call_tool("typed_point", &args).await.unwrap();
                let hand_text = hand.first_text().unwrap();
                let typed_text = typed.first_text().unwrap();
                assert_eq!(typed.is_error, hand.is_error, "{args}: {typed:?}");
                assert_eq!(
                    typed_text.replace("typed_point", "point"),
                    hand_text,
                    "{args} (validate {validate})"
                );
            }
            let r = client
                .call_tool("typed_point", json!({"x": "1", "y": 2}))
                .await
                .unwrap();
            assert_eq!(r.is_error, Some(true));
            let text = r.first_text().unwrap();
            if validate {
                assert_eq!(
                    text,
                    "Invalid arguments for tool `typed_point`: `x` must be an integer, not string"
                );
            } else {
                assert!(text.starts_with("invalid arguments: "), "{text}");
            }
        });
    }
    // A value the schema allows but the type refuses (`u32` has no maximum in its schema):
    // the `args.parse` error, as a tool error.
    #[derive(Deserialize, JsonSchema)]
    struct Small {
        #[allow(dead_code)]
        n: u32,
    }
    let server = Server::new("s", "1").typed_tool(Tool::new("small"), |_, _: Small| async {
        Ok(CallToolResult::text("ok"))
    });
    let (exec, lb) = pair(&server, Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let r = client
            .call_tool("small", json!({"n": 5_000_000_000u64}))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.first_text(),
            Some("invalid arguments: invalid value: integer `5000000000`, expected u32")
        );
        // An unknown tool is still a protocol error.
        let err = client.call_tool("nope", ()).await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
    });
}

#[test]
fn typed_output_for_a_hand_written_input_schema() {
    #[derive(Serialize, JsonSchema)]
    struct Echo {
        said: String,
    }
    let server = Server::new("echo", "1").typed_tool(
        Tool::new("echo").string("text", required()),
        |_, args: ToolArgs| async move {
            let said = args.get_string("text", "");
            if said.is_empty() {
                return Err(Error::new("nothing to echo"));
            }
            Ok(Json(Echo { said }))
        },
    );
    let echo = tool(&server, "echo");
    assert_eq!(
        Value::Object(echo.input_schema),
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        "the builder's schema is kept"
    );
    assert_eq!(
        echo.output_schema.unwrap()["properties"]["said"]["type"],
        "string"
    );
    let (exec, lb) = pair(&server, Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let r = client
            .call_tool("echo", json!({"text": "hi"}))
            .await
            .unwrap();
        assert_eq!(r.structured_content, Some(json!({"said": "hi"})));
        assert_eq!(r.first_text(), Some(r#"{"said":"hi"}"#));
        let r = client.call_tool("echo", json!({"text": ""})).await.unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.first_text(), Some("nothing to echo"));
        assert_eq!(r.structured_content, None);
    });
}

#[test]
#[should_panic(expected = "is not `\"type\": \"object\"`")]
fn a_non_object_argument_type_is_a_definition_error() {
    let _ = Server::new("s", "1").typed_tool(Tool::new("list"), |_, _: Vec<u8>| async {
        Ok(CallToolResult::text("ok"))
    });
}

#[test]
#[should_panic(expected = "the output schema of `f64`")]
fn a_non_object_output_type_is_a_definition_error() {
    let _ = Server::new("s", "1")
        .typed_tool(Tool::new("n"), |_, _: ToolArgs| async { Ok(Json(1.0f64)) });
}

/// The arguments of the review prompt.
#[derive(Debug, Deserialize, JsonSchema)]
struct ReviewArgs {
    /// The code to review
    code: String,
    /// What to look at first
    focus: Option<String>,
    /// How blunt to be
    #[serde(default)]
    tone: Tone,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Tone {
    #[default]
    Kind,
    Blunt,
}

fn reviewer() -> Server {
    Server::new("reviewer", "1").typed_prompt(
        Prompt::new("review").description("Reviews code"),
        |_ctx, args: ReviewArgs| async move {
            let focus = args.focus.unwrap_or_else(|| "correctness".into());
            Ok(GetPromptResult::user_text(format!(
                "Review for {focus}, {:?}:\n{}",
                args.tone, args.code
            )))
        },
    )
}

#[test]
fn typed_prompt_arguments_are_listed_and_parsed() {
    let (exec, lb) = pair(&reviewer(), Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let prompts = client.list_prompts().await.unwrap();
        let listed = serde_json::to_value(&prompts[0]).unwrap();
        assert_eq!(
            listed,
            json!({
                "name": "review",
                "description": "Reviews code",
                "arguments": [
                    {"name": "code", "description": "The code to review", "required": true},
                    {"name": "focus", "description": "What to look at first", "required": false},
                    {"name": "tone", "description": "How blunt to be", "required": false}
                ]
            })
        );
        let got = client
            .get_prompt("review", [("code", "fn main() {}"), ("tone", "blunt")])
            .await
            .unwrap();
        let text = serde_json::to_value(&got.messages[0].content).unwrap();
        assert_eq!(text["text"], "Review for correctness, Blunt:\nfn main() {}");

        let err = client
            .get_prompt("review", [("focus", "style")])
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
        assert!(
            err.to_string()
                .contains("missing required arguments for prompt `review`: code"),
            "{err}"
        );
        let err = client
            .get_prompt("review", [("code", "x"), ("tone", "rude")])
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
        assert!(
            err.to_string()
                .contains("invalid arguments for prompt `review`: unknown variant `rude`"),
            "{err}"
        );
    });
}

#[test]
fn generated_definitions_are_valid_under_the_spec_schemas() {
    let Some(spec) = spec_data("generated_definitions_are_valid_under_the_spec_schemas") else {
        return;
    };
    let server = calculator();
    let mut tools: Vec<Value> = server
        .tools()
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    assert!(tools[0].get("outputSchema").is_some());
    let result = serde_json::to_value(
        CallToolResult::structured(&json!({"sum": 3.0, "expression": "1 + 2"})).unwrap(),
    )
    .unwrap();
    let prompt = serde_json::to_value(listed_prompts(&reviewer())).unwrap();
    for name in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        let revision = Revision::load(&spec, name);
        for tool in &tools {
            revision
                .check("Tool", tool)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{tool}"));
        }
        let mut result = result.clone();
        if name == "2026-07-28" {
            // What the server adds for a modern client.
            result["resultType"] = json!("complete");
        }
        revision
            .check("CallToolResult", &result)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{result}"));
        for p in prompt.as_array().unwrap() {
            revision
                .check("Prompt", p)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{p}"));
        }
    }
    // The validator does refuse a broken definition (a root that is not an object).
    let revision = Revision::load(&spec, "2025-11-25");
    tools[0]["inputSchema"]["type"] = json!("array");
    assert!(revision.check("Tool", &tools[0]).is_err());
}

/// The prompts as `prompts/list` gives them.
fn listed_prompts(server: &Server) -> Vec<Prompt> {
    let (exec, lb) = pair(server, Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        client.list_prompts().await.unwrap()
    })
}
