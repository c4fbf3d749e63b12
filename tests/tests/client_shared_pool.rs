//! mcp-tokio's default HTTP client is shared by the sessions made on one thread
//! (`HttpOptions`): runtimes come and go on a thread (every `#[tokio::test]` does that), and a
//! pooled connection whose runtime ended must never be handed to a later session.

use std::time::Duration;

use mcp_proto::server::ServerConfig;
use mcp_service::{CallToolResult, Server, Tool, ToolArgs};
use serde_json::json;

fn echo_server() -> Server {
    Server::new("pool", "1").tool(
        Tool::new("echo").string("text", mcp_service::required()),
        |_ctx, args: ToolArgs| async move { Ok(CallToolResult::text(args.get_string("text", ""))) },
    )
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(result).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn sessions_of_later_runtimes_on_a_thread_never_get_a_dead_pooled_connection() {
    // The server on a runtime of its own, alive for the whole test.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let serving = server_rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        mcp_tokio::serve(listener, echo_server()).start().unwrap()
    });
    let url = serving.url().to_owned();
    for round in 0..4 {
        // A runtime per round on this one thread: the connections the previous round pooled
        // died with its runtime.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let limit = Duration::from_secs(10);
            let client = tokio::time::timeout(limit, mcp_tokio::Client::connect(&url))
                .await
                .unwrap_or_else(|e| panic!("round {round}: connect: {e}"))
                .unwrap_or_else(|e| panic!("round {round}: connect: {e}"));
            for n in 0..3 {
                let said = format!("round {round} call {n}");
                let result =
                    tokio::time::timeout(limit, client.call_tool("echo", json!({ "text": said })))
                        .await
                        .unwrap_or_else(|e| panic!("round {round}: call: {e}"))
                        .unwrap_or_else(|e| panic!("round {round}: call: {e}"));
                assert_eq!(text(&result), said);
            }
            // The session ends; its connection stays in the thread's pool.
            drop(client);
        });
        drop(rt);
    }
    server_rt.block_on(serving.shutdown());
}

/// A server whose accept loop counts the connections it took.
async fn counting_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = ServerConfig::default()
        .with_session_ids(mcp_tokio::RandomSessionIds)
        .bound_to(addr.ip());
    let service = mcp_tokio::McpService::new(echo_server(), config);
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let service = service.clone();
            let svc = hyper::service::service_fn(move |req| {
                let service = service.clone();
                async move { service.handle(req).await }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc),
            );
        }
    });
    (format!("http://{addr}/mcp"), accepted)
}

/// Connections the server took for `sessions` sessions made one after the other on this
/// thread, each making a call, with `own` pools or the thread's shared one.
fn connections_for(sessions: usize, own: bool) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (url, accepted) = counting_server().await;
        let mut kept = Vec::new();
        for n in 0..sessions {
            let client = mcp_tokio::Client::builder(&url)
                .http(|h| h.own_pool(own))
                .connect()
                .await
                .unwrap();
            let said = format!("session {n}");
            let result = client
                .call_tool("echo", json!({ "text": said }))
                .await
                .unwrap();
            assert_eq!(text(&result), said);
            // Held: an idle session, as a gateway holds many.
            kept.push(client);
        }
        accepted.load(std::sync::atomic::Ordering::SeqCst)
    })
}

#[test]
fn the_sessions_of_a_thread_share_its_connections_unless_they_ask_for_their_own() {
    let shared = connections_for(5, false);
    let own = connections_for(5, true);
    assert!(
        own >= 5,
        "{own} connections for 5 sessions with pools of their own"
    );
    assert!(
        shared < own && shared <= 2,
        "{shared} connections for 5 sessions sharing a pool (own pools: {own})"
    );
}
