//! The users server through the real transport state machines (in memory), in stateful
//! and stateless mode.

use mcp_proto::client::ClientConfig;
use mcp_proto::server::ServerConfig;
use mcp_service::client::Client;
use mcp_tests::pair::MemoryPair;
use mcp_tests::users;
use serde_json::json;

fn scenario(mut pair: MemoryPair) {
    let client = pair.client.clone();
    pair.block_on(async move {
        client.initialize().await.unwrap();
        let created = client
            .call_tool(
                "create_user",
                json!({"name": "Ada", "email": "ada@example.com", "age": 36}),
            )
            .await
            .unwrap();
        assert_eq!(created.is_error, None, "{created:?}");
        let got = client
            .call_tool("get_user", json!({"user_id": "user_1"}))
            .await
            .unwrap();
        assert_eq!(got.structured_content.unwrap()["name"], "Ada");
        let found = client
            .call_tool("search_users", json!({"query": "ada"}))
            .await
            .unwrap();
        assert_eq!(found.structured_content.unwrap()["total"], 1);
        let bad = client
            .call_tool("create_user", json!({"name": "B", "email": "nope"}))
            .await
            .unwrap();
        assert_eq!(bad.is_error, Some(true));
        let r = client.read_resource("users://user_1").await.unwrap();
        assert_eq!(r.contents.len(), 1);
    });
}

#[test]
fn users_over_a_stateful_session() {
    scenario(MemoryPair::new(&users::server(), Client::builder("t", "1")));
}

#[test]
fn users_over_a_stateless_router() {
    let pair = MemoryPair::connect(
        &users::server(),
        Client::builder("t", "1"),
        ClientConfig::new(),
        ServerConfig::default().with_stateless(true),
    );
    scenario(pair);
}
