//! Memory: what an idle client session keeps once its requests are answered. The driver
//! frees the buffers of the session's empty tables and queues (`ClientSession::shrink_idle`,
//! called at the end of every `ClientDriver::pump`); without that, an idle session kept
//! ≈ 2.5 KB of empty buffers (the request table's node, the post table's, the output
//! queue's): 7.7 KB per pair instead of 5.2 KB here, the bound 6.5 KB. Measured on the
//! in-memory pair (the production drivers, no sockets), with a counting allocator: the heap
//! a pair (client and server session) holds after `initialize` and 20 calls, idle, over
//! what it held before `initialize`, for 200 pairs.
#![allow(unsafe_code)] // The counting allocator (`counting`), in this test binary only.

use mcp_proto::client::ClientConfig;
use mcp_proto::server::ServerConfig;
use mcp_service::client::Client;
use mcp_service::schema::CallToolResult;
use mcp_service::{Server, Tool, ToolArgs};
use mcp_tests::pair::MemoryPair;

mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const PAIRS: usize = 200;

fn server() -> Server {
    Server::new("memory", "0").tool(
        Tool::new("ok").description("Answers ok"),
        |_ctx, _args: ToolArgs| async move { Ok(CallToolResult::text("ok")) },
    )
}

#[test]
fn an_idle_client_session_keeps_no_empty_buffers() {
    let server = server();
    let mut pairs: Vec<MemoryPair> = (0..PAIRS)
        .map(|_| {
            MemoryPair::connect(
                &server,
                Client::builder("memory-client", "0"),
                ClientConfig::new(),
                ServerConfig::default(),
            )
        })
        .collect();
    let before = counting::live();
    for pair in &mut pairs {
        let client = pair.client.clone();
        pair.block_on(async move {
            client.initialize().await.expect("initialize");
            for _ in 0..20 {
                client.call_tool("ok", ()).await.expect("call");
            }
        });
        // The pair's record of what the transport did is the test's, not the sessions'.
        pair.clear_trace();
    }
    let after = counting::live();
    #[allow(clippy::cast_precision_loss)]
    let per_pair = (after - before) as f64 / PAIRS as f64;
    println!("heap an idle pair holds after initialize and 20 calls: {per_pair:.0} bytes");
    assert!(
        per_pair <= 6_500.0,
        "{per_pair} bytes per idle pair (client and server session)"
    );
}
