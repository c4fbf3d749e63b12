//! Every public constructor is secure by default: `McpService::new` (what the axum example and
//! any hand-mounted service call) with `ServerConfig::default()` hands out CSPRNG session ids,
//! never the predictable test ids, and keeps loopback-only `Host` validation.

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use mcp_proto::server::ServerConfig;
use mcp_tokio::McpService;

fn initialize(host: &str) -> Request<Full<Bytes>> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    Request::post("/mcp")
        .header("host", host)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("request")
}

#[tokio::test]
async fn mcp_service_new_hands_out_random_session_ids_and_validates_host() {
    let service = McpService::new(mcp_tests::everything::server(), ServerConfig::default());
    let mut ids = Vec::new();
    for _ in 0..2 {
        let response = service
            .handle(initialize("localhost:3000"))
            .await
            .expect("answer");
        assert_eq!(response.status(), StatusCode::OK);
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let _ = response.into_body().collect().await;
        assert!(!id.contains("insecure"), "{id}");
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "16 random bytes as hex: {id}"
        );
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
    // A rebinding attacker's Host is refused by default.
    let response = service
        .handle(initialize("evil.example"))
        .await
        .expect("answer");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    service.shutdown();
}
