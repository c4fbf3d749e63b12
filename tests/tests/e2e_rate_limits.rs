//! Rate limits end to end on loopback, on both runtimes: a raw request over the per-address
//! limit gets 429 with `Retry-After` and the JSON-RPC error carrying the delay (the adapters
//! hand the connection's address to the core); our client, calling faster than a per-session
//! limit, gets every answer because it honours `Retry-After` (on the four client→server pairs).
//! Every await is bounded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use mcp_proto::client::{ClientConfig, ClientError, RateLimitRetry};
use mcp_proto::server::{RateLimits, ServerConfig};
use mcp_service::PeerError;
use mcp_service::client::{Client as ServiceClient, RequestError};
use mcp_tests::runtime::Runtime;
use mcp_tests::users;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn post(addr: SocketAddr, body: Value) -> (StatusCode, http::HeaderMap, Bytes) {
    let req = Request::builder()
        .method(Method::POST)
        .uri("/mcp")
        .header(header::HOST, addr.to_string())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let resp = mcp_tests::raw::exchange(addr, req).await;
    let (parts, body) = resp.into_parts();
    let body = bounded("body", body.collect())
        .await
        .expect("body")
        .to_bytes();
    (parts.status, parts.headers, body)
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}})
}

/// Over the per-address limit: 429, `Retry-After: 1`, a JSON-RPC error with the delay.
async fn over_the_address_limit_is_429_with_retry_after(rt: Runtime) {
    let config = ServerConfig::default().with_rate_limits(RateLimits::default().per_address(1, 1));
    let serving = bounded("bind", rt.serve(users::server(), config))
        .await
        .expect("serve");
    let addr = serving.local_addr();
    let (status, _, _) = post(addr, initialize(1)).await;
    assert_eq!(status, StatusCode::OK);
    // A new connection from the same address shares the bucket.
    let (status, headers, body) = post(addr, initialize(2)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers[header::RETRY_AFTER], "1");
    let error: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(error["error"]["code"], -32000);
    assert_eq!(error["error"]["data"]["retryAfter"], 1);
    assert!(error["id"].is_null());
    bounded("shutdown", serving.shutdown()).await;
}

/// Calls faster than the session's limit all succeed, because the client waits out each 429.
async fn the_client_honours_retry_after(server_rt: Runtime, client_rt: Runtime) {
    // 2 per second, bursts of 2; `notifications/initialized` spends one token.
    let config = ServerConfig::default().with_rate_limits(RateLimits::default().per_session(2, 2));
    let serving = bounded("bind", server_rt.serve(users::server(), config))
        .await
        .expect("serve");
    let client = bounded(
        "connect",
        client_rt.connect_with(
            serving.url(),
            ServiceClient::builder("e2e", "1"),
            ClientConfig::new(),
        ),
    )
    .await
    .expect("connect");
    let started = Instant::now();
    let call = || client.call_tool("get_user", json!({"user_id": "user_9"}));
    let (a, b, c, d) = bounded("calls", async {
        tokio::join!(call(), call(), call(), call())
    })
    .await;
    for r in [a, b, c, d] {
        let r = r.expect("every call eventually succeeds");
        assert_eq!(r.is_error, Some(true), "no such user: a tool result");
    }
    // 1 token at once, then 2 per second: the last call went out at least a second later.
    assert!(started.elapsed() >= Duration::from_secs(1));
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

/// With re-sends off, the 429 reaches the application typed, with the server's delay.
async fn the_application_reads_the_typed_error(server_rt: Runtime, client_rt: Runtime) {
    // One token, spent by `notifications/initialized`.
    let config = ServerConfig::default().with_rate_limits(RateLimits::default().per_session(1, 1));
    let serving = bounded("bind", server_rt.serve(users::server(), config))
        .await
        .expect("serve");
    let client = bounded(
        "connect",
        client_rt.connect_with(
            serving.url(),
            ServiceClient::builder("e2e", "1"),
            ClientConfig::new().with_rate_limit_retry(RateLimitRetry::off()),
        ),
    )
    .await
    .expect("connect");
    let err = bounded(
        "call",
        client.call_tool("get_user", json!({"user_id": "user_9"})),
    )
    .await
    .expect_err("over the limit");
    assert_eq!(
        err,
        RequestError::Transport(PeerError::Client(ClientError::RateLimited {
            retry_after: Some(Duration::from_secs(1)),
            retries: 0,
        }))
    );
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

mod tokio_server {
    use mcp_tests::runtime::Runtime;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn over_the_address_limit_is_429_with_retry_after() {
        super::over_the_address_limit_is_429_with_retry_after(Runtime::Tokio).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tokio_client_honours_retry_after() {
        super::the_client_honours_retry_after(Runtime::Tokio, Runtime::Tokio).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn smol_client_honours_retry_after() {
        super::the_client_honours_retry_after(Runtime::Tokio, Runtime::Smol).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_application_reads_the_typed_error() {
        super::the_application_reads_the_typed_error(Runtime::Tokio, Runtime::Tokio).await
    }
}

mod smol_server {
    use mcp_tests::runtime::Runtime;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn over_the_address_limit_is_429_with_retry_after() {
        super::over_the_address_limit_is_429_with_retry_after(Runtime::Smol).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn smol_client_honours_retry_after() {
        super::the_client_honours_retry_after(Runtime::Smol, Runtime::Smol).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tokio_client_honours_retry_after() {
        super::the_client_honours_retry_after(Runtime::Smol, Runtime::Tokio).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_application_reads_the_typed_error() {
        super::the_application_reads_the_typed_error(Runtime::Smol, Runtime::Smol).await
    }
}
