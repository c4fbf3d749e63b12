//! The Redis links' own thread (`mcp-redis-link`, one per backend, in both adapters) ends
//! with the backend and its last link: a server that makes and drops backends leaks no
//! thread. Its own test binary: it counts the process's threads by name, which another test
//! making backends at the same time would disturb.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use mcp_driver::{ClusterBackend, ClusterInbox};
use mcp_proto::server::{ClusterDelivery, StoreOp, StoreReply, Ticket};
use mcp_tests::require_service;
use mcp_tests::services::Redis;

/// The process's threads named `mcp-redis-link`.
fn link_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|name| name.trim() == "mcp-redis-link")
                .count()
        })
        .unwrap_or(0)
}

/// Waits (bounded) until there are `n` link threads; says how many there were at the end.
fn settle(n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    while link_threads() != n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    link_threads()
}

fn inbox(tx: mpsc::Sender<ClusterDelivery>) -> ClusterInbox {
    ClusterInbox::new(move |d| tx.send(d).is_ok())
}

/// A backend, a link on it that answered once, then both dropped: the thread comes and goes.
fn comes_and_goes(backend: std::sync::Arc<dyn ClusterBackend>) {
    assert_eq!(settle(1), 1, "one thread for the backend's links");
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    let load = StoreOp::Load {
        session: "none".into(),
    };
    link.submit(Instant::now(), Ticket::from_u64(1), load);
    let answer = loop {
        match rx.recv_timeout(Duration::from_secs(5)).expect("an answer") {
            ClusterDelivery::Reply(t, r) => break (t, r),
            _ => continue,
        }
    };
    assert_eq!(answer, (Ticket::from_u64(1), StoreReply::Session(None)));
    drop(backend);
    assert_eq!(settle(1), 1, "the link keeps it while it lives");
    drop(link);
    assert_eq!(settle(0), 0, "ended with the backend and its last link");
}

#[test]
fn the_redis_link_thread_ends_with_the_backend_and_its_last_link() {
    let redis = require_service!(Redis::start());
    assert_eq!(link_threads(), 0);
    let config = || mcp_smol::RedisConfig::default().with_prefix("thread");
    comes_and_goes(mcp_smol::redis_backend(&redis.url(), config()).unwrap());
    let rt = mcp_tests::runtime::one_worker_tokio();
    let _guard = rt.enter();
    comes_and_goes(mcp_tokio::redis_backend(&redis.url(), config()).unwrap());
}
