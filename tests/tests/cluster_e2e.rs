//! Three server instances behind nginx as a round-robin load balancer that is not sticky,
//! sharing their sessions through one store ([`SharedMemoryCluster`]), on every runtime
//! pair: our client's session, its GET stream, server→client requests answered through
//! another instance, the log level it set, a request stream closed for polling and
//! resumed, and its DELETE all work wherever each HTTP request lands. Needs nginx (skipped with a message on a developer machine without it;
//! required under `CI=true`).

use std::sync::Arc;
use std::time::Duration;

use mcp_driver::ClusterBackend;
use mcp_driver::SharedMemoryCluster;
use mcp_proto::server::{ClusterConfig, ServerConfig};
use mcp_service::client::ServerNotification;
use mcp_service::schema::LoggingLevel;
use mcp_tests::everything;
use mcp_tests::harness::{SAMPLING_ANSWER, conformance_client};
use mcp_tests::require_service;
use mcp_tests::runtime::{Runtime, Serving};
use mcp_tests::services::Nginx;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// `n` instances of the everything server on `rt`, one store.
async fn instances(rt: Runtime, store: &SharedMemoryCluster, n: usize) -> Vec<Serving> {
    let mut out = Vec::new();
    for i in 0..n {
        let backend: Arc<dyn ClusterBackend> = Arc::new(store.clone());
        let cluster = ClusterConfig::new(format!("i{i}")).expect("name");
        let config = ServerConfig::default()
            .with_retry_interval(Duration::from_millis(50))
            .with_cluster(cluster);
        let serving = bounded(
            "bind",
            rt.serve_clustered(everything::server(), config, backend),
        )
        .await
        .expect("serve");
        out.push(serving);
    }
    out
}

async fn a_session_is_served_by_every_instance(server: Runtime, client_rt: Runtime) {
    let store = SharedMemoryCluster::new();
    let servers = instances(server, &store, 3).await;
    let addrs: Vec<_> = servers.iter().map(|s| s.local_addr()).collect();
    let lb = require_service!(Nginx::round_robin(&addrs));
    let url = format!("{}/mcp", lb.url());
    let client = bounded(
        "connect",
        client_rt.connect_with(
            &url,
            conformance_client(),
            mcp_proto::client::ClientConfig::new().with_continuous_listening(true),
        ),
    )
    .await
    .expect("connect through the load balancer");
    let now = std::time::Instant::now();
    assert_eq!(
        store.with(|s| s.session_count(now)),
        1,
        "one session in the store"
    );

    // Set on one instance, obeyed by the others: the log level is session state.
    bounded("logging/setLevel", client.set_level(LoggingLevel::Debug))
        .await
        .expect("setLevel");
    for round in 0..3 {
        let mut notes = client.notifications();
        bounded(
            "logging tool",
            client.call_tool("test_tool_with_logging", json!({})),
        )
        .await
        .unwrap_or_else(|e| panic!("logging tool, round {round}: {e}"));
        let logs = notes
            .drain()
            .into_iter()
            .filter(|n| matches!(n, ServerNotification::Log(_)))
            .count();
        assert_eq!(
            logs, 3,
            "round {round}: every log message, on every instance"
        );
    }
    // A server→client request whose answer lands on another instance (round robin).
    for round in 0..3 {
        let sampled = bounded(
            "sampling",
            client.call_tool("test_sampling", json!({"prompt": "hi"})),
        )
        .await
        .unwrap_or_else(|e| panic!("sampling, round {round}: {e}"));
        assert_eq!(
            sampled.first_text(),
            Some(format!("LLM response: {SAMPLING_ANSWER}").as_str())
        );
    }
    let elicited = bounded(
        "elicitation",
        client.call_tool("test_elicitation", json!({"message": "who?"})),
    )
    .await
    .expect("elicitation");
    assert!(
        elicited
            .first_text()
            .is_some_and(|t| t.starts_with("User response: action=accept")),
        "{elicited:?}"
    );
    // The server closes a request's stream for polling; the client resumes it with
    // Last-Event-ID, on whichever instance the balancer picks, from the store.
    for round in 0..3 {
        let resumed = bounded(
            "reconnection",
            client.call_tool("test_reconnection", json!({})),
        )
        .await
        .unwrap_or_else(|e| panic!("reconnection, round {round}: {e}"));
        assert_eq!(resumed.first_text(), Some("Reconnection test completed"));
    }
    // Every instance served some of it, and no resume was refused (each one worked on the
    // first instance it reached).
    let log = lb.access_log();
    assert!(
        !log.lines().any(|l| l.starts_with("GET /mcp 4")),
        "a resume was refused:\n{log}"
    );
    for a in &addrs {
        assert!(log.contains(&a.to_string()), "{a} served nothing:\n{log}");
    }
    // DELETE lands somewhere; the session is gone from the store (and so everywhere).
    bounded("close", client.close()).await;
    let now = std::time::Instant::now();
    assert_eq!(
        store.with(|s| s.session_count(now)),
        0,
        "deleted in the store"
    );
    for s in servers {
        bounded("shutdown", s.shutdown()).await;
    }
}

macro_rules! pairs {
    ($($name:ident: $server:ident, $client:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                a_session_is_served_by_every_instance(Runtime::$server, Runtime::$client).await
            }
        )*
    };
}

pairs! {
    tokio_client_tokio_servers: Tokio, Tokio;
    smol_client_smol_servers: Smol, Smol;
    smol_client_tokio_servers: Tokio, Smol;
    tokio_client_smol_servers: Smol, Tokio;
}
