//! The users server end to end over the in-memory pair: a created user can be fetched (tool
//! and `users://{user_id}`), searched and paged; bad input gets a clear tool error.

use mcp_proto::jsonrpc::error_codes;
use mcp_service::client::Client;
use mcp_service::schema::{CallToolResult, ResourceContents};
use mcp_tests::harness::pair;
use mcp_tests::users;
use serde_json::{Value, json};

fn structured(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, None, "{r:?}");
    let text: Value = serde_json::from_str(r.first_text().unwrap()).unwrap();
    assert_eq!(
        Some(&text),
        r.structured_content.as_ref(),
        "text and structured agree"
    );
    text
}

fn error_text(r: &CallToolResult) -> &str {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    r.first_text().unwrap()
}

#[test]
fn schemas_match_the_seed() {
    let (exec, lb) = pair(&users::server(), Client::builder("t", "1"));
    let client = lb.client.clone();
    let (init, tools, templates) = exec.block_on(async move {
        let init = client.initialize().await.unwrap();
        (
            init,
            client.list_tools().await.unwrap(),
            client.list_resource_templates().await.unwrap(),
        )
    });
    assert_eq!(init.server_info.name, "StreamableHTTP API Server");
    assert!(init.capabilities.tools.is_some() && init.capabilities.resources.is_some());
    let schema = |name: &str| {
        Value::Object(
            tools
                .iter()
                .find(|t| t.name == name)
                .unwrap()
                .input_schema
                .clone(),
        )
    };
    assert_eq!(
        schema("get_user"),
        json!({"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]})
    );
    assert_eq!(
        schema("create_user")["properties"]["age"],
        json!({"type": "number", "minimum": 0})
    );
    assert_eq!(schema("create_user")["required"], json!(["name", "email"]));
    assert_eq!(
        schema("search_users")["properties"],
        json!({
            "query": {"type": "string", "description": "Search query"},
            "limit": {"type": "number", "default": 10, "minimum": 1, "maximum": 100},
            "offset": {"type": "number", "default": 0, "minimum": 0}
        })
    );
    assert_eq!(templates[0].uri_template, "users://{user_id}");
    assert_eq!(templates[0].mime_type.as_deref(), Some("application/json"));
}

#[test]
fn create_get_search_and_page() {
    let (exec, lb) = pair(&users::server(), Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let created = client
            .call_tool(
                "create_user",
                json!({"name": "Ada Lovelace", "email": "ada@example.com", "age": 36}),
            )
            .await
            .unwrap();
        let created = structured(&created);
        assert_eq!(created["id"], "user_1");
        assert_eq!(created["message"], "User created successfully");
        assert_eq!(
            created["user"],
            json!({"id": "user_1", "name": "Ada Lovelace", "email": "ada@example.com", "age": 36})
        );

        let got = client
            .call_tool("get_user", json!({"user_id": "user_1"}))
            .await
            .unwrap();
        assert_eq!(structured(&got), created["user"]);

        // The resource template serves the same user.
        let r = client.read_resource("users://user_1").await.unwrap();
        let [ResourceContents::Text(t)] = &r.contents[..] else {
            panic!("{r:?}")
        };
        assert_eq!(t.mime_type.as_deref(), Some("application/json"));
        assert_eq!(
            serde_json::from_str::<Value>(&t.text).unwrap(),
            created["user"]
        );

        for (name, email) in [
            ("Alan Turing", "alan@example.org"),
            ("Grace Hopper", "grace@navy.mil"),
            ("Adele Goldberg", "adele@parc.com"),
        ] {
            let r = client
                .call_tool("create_user", json!({"name": name, "email": email}))
                .await
                .unwrap();
            structured(&r);
        }
        // Age defaults to 0 when left out.
        let r = client
            .call_tool("get_user", json!({"user_id": "user_2"}))
            .await
            .unwrap();
        assert_eq!(structured(&r)["age"], 0);

        // Search: substring of name or email, any case; defaults limit 10, offset 0.
        let r = structured(
            &client
                .call_tool("search_users", json!({"query": "AD"}))
                .await
                .unwrap(),
        );
        assert_eq!(r["total"], 2);
        assert_eq!(
            (r["limit"].clone(), r["offset"].clone(), r["query"].clone()),
            (json!(10), json!(0), json!("AD"))
        );
        let names: Vec<&str> = r["users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Ada Lovelace", "Adele Goldberg"]);

        // Paging through everyone, two at a time.
        let mut seen = Vec::new();
        for offset in [0, 2, 4] {
            let r = structured(
                &client
                    .call_tool("search_users", json!({"limit": 2, "offset": offset}))
                    .await
                    .unwrap(),
            );
            assert_eq!(r["total"], 4);
            seen.extend(
                r["users"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|u| u["id"].as_str().unwrap().to_owned()),
            );
        }
        assert_eq!(seen, ["user_1", "user_2", "user_3", "user_4"]);
    });
}

#[test]
fn bad_input_gets_clear_tool_errors() {
    let (exec, lb) = pair(&users::server(), Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let call = |name: &'static str, args: Value| {
            let client = client.clone();
            async move { client.call_tool(name, args).await.unwrap() }
        };
        let r = call("create_user", json!({"email": "x@y.z"})).await;
        assert_eq!(error_text(&r), "Invalid arguments for tool `create_user`: `name` is required");
        let r = call("create_user", json!({"name": "A", "email": "not-an-email"})).await;
        assert_eq!(error_text(&r), "invalid email format: not-an-email");
        let r = call("create_user", json!({"name": "A", "email": "a@b.c", "age": -1})).await;
        assert_eq!(error_text(&r), "Invalid arguments for tool `create_user`: `age` must be at least 0");
        let r = call("create_user", json!({"name": "A", "email": "a@b.c", "age": 2.5})).await;
        assert_eq!(error_text(&r), "age must be a whole number of years, not 2.5");
        let r = call("create_user", json!({"name": "", "email": "a@b.c", "age": "ten"})).await;
        assert_eq!(
            error_text(&r),
            "Invalid arguments for tool `create_user`: `name` must be at least 1 characters long; \
             `age` must be a number, not string"
        );
        let r = call("search_users", json!({"limit": 101, "offset": -3})).await;
        assert_eq!(
            error_text(&r),
            "Invalid arguments for tool `search_users`: `limit` must be at most 100; `offset` must be at least 0"
        );
        let r = call("get_user", json!({"user_id": "user_99"})).await;
        assert_eq!(error_text(&r), "user not found: user_99");
        let r = call("get_user", json!({})).await;
        assert_eq!(error_text(&r), "Invalid arguments for tool `get_user`: `user_id` is required");

        // Protocol errors stay JSON-RPC errors.
        let err = client.call_tool("no_such_tool", json!({})).await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
        let err = client.read_resource("users://user_99").await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::RESOURCE_NOT_FOUND));
        let err = client.read_resource("users://").await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::RESOURCE_NOT_FOUND));
    });
}
