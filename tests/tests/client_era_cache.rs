//! The era remembered per origin across sessions (the spec's versioning section: cache the
//! era per origin). The core keeps nothing between sessions: it takes what the application
//! knows (`ClientConfig::with_known_era`) and reports what it learns
//! (`ClientEvent::KnownEraChanged`); the driver's `EraCache`, given to `Connect::era_cache`,
//! does both. Checked end to end on loopback: the first session probes (`server/discover`),
//! the verdict lands in the cache under the endpoint's origin, and a later session for a
//! legacy origin skips the probe.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_proto::ProtocolVersion;
use mcp_proto::client::{ClientConfig, EraMode, KnownEra};
use mcp_proto::server::ServerConfig;
use mcp_tokio::EraCache;

const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn serve(config: ServerConfig) -> mcp_tokio::Serving {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    mcp_tokio::serve(listener, mcp_tests::everything::server())
        .config(config)
        .start()
        .expect("serve")
}

/// Connects in `EraMode::Auto` with `cache`; returns how many `server/discover` probes the
/// session sent.
async fn connect(url: &str, cache: &EraCache) -> usize {
    let probes = Arc::new(AtomicUsize::new(0));
    let counted = probes.clone();
    let config = ClientConfig::new()
        .with_era(EraMode::Auto)
        .with_header_fn(move |ctx, _| {
            if ctx.rpc_method == Some("server/discover") {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
    let client = bounded(
        "connect",
        mcp_tokio::Client::builder(url)
            .config(config)
            .era_cache(cache.clone())
            .connect(),
    )
    .await
    .expect("connect");
    bounded("tools/list", client.list_tools())
        .await
        .expect("tools/list");
    bounded("close", client.close()).await;
    probes.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_origin_is_remembered_and_not_probed_again() {
    let serving = serve(ServerConfig::default().legacy_only()).await;
    let origin = format!("http://{}", serving.local_addr());
    let cache = EraCache::new();
    assert_eq!(
        connect(serving.url(), &cache).await,
        1,
        "the first session probes"
    );
    assert_eq!(cache.get(&origin), Some(KnownEra::Legacy));
    assert_eq!(
        connect(serving.url(), &cache).await,
        0,
        "a known legacy origin is not probed"
    );
    // Another cache knows nothing of it: its session probes again.
    assert_eq!(connect(serving.url(), &EraCache::new()).await, 1);
    bounded("shutdown", serving.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_origin_is_remembered_at_its_version() {
    let serving = serve(ServerConfig::default()).await;
    let origin = format!("http://{}", serving.local_addr());
    let cache = EraCache::new();
    assert_eq!(connect(serving.url(), &cache).await, 1);
    assert_eq!(
        cache.get(&origin),
        Some(KnownEra::Modern(ProtocolVersion::V2026_07_28))
    );
    // A known modern origin is probed at its version (the modern era has no `initialize`),
    // and stays known.
    assert_eq!(connect(serving.url(), &cache).await, 1);
    assert!(matches!(cache.get(&origin), Some(KnownEra::Modern(_))));
    bounded("shutdown", serving.shutdown()).await;
}
