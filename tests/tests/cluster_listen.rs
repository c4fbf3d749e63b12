//! `subscriptions/listen` (2026-07-28) across the instances of a cluster: a change on one
//! instance (a resource updated, a tool added) reaches the listen streams held open on the
//! others through the bus ([`BusMessage::Notice`]), each exactly once, with that stream's own
//! subscription id and only when its filter asked for it; the instance that made the change
//! tells its own listeners once (no echo through the bus).
//!
//! - sans-IO: two and three routers on one `MemoryCluster` (`Router::broadcast_notice`, the
//!   [`ServerOutput::ClusterNotice`] of the others, no echo, lost while the store is away);
//! - end to end on both runtimes, over raw HTTP to each instance: three servers on one
//!   `SharedMemoryCluster`, the same on Redis (one backend per instance, as three processes
//!   would have; skipped without `redis-server`, failing under `CI=true`), and one `Server`
//!   bound to two instances of a cluster (it tells its listeners itself and hears each notice
//!   of the others once).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcp_driver::ClusterBackend;
use mcp_driver::SharedMemoryCluster;
use mcp_proto::mirror;
use mcp_proto::server::{BusMessage, ClusterConfig, ServerConfig};
use mcp_service::{CallToolResult, Resource, ResourceContents, Server, Tool};
use mcp_tests::cluster_harness::Cluster;
use mcp_tests::require_service;
use mcp_tests::runtime::{Runtime, Serving};
use mcp_tests::services::Redis;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Sans-IO: the routers.
// ---------------------------------------------------------------------------------------

#[test]
fn a_notice_broadcast_by_one_router_is_output_by_the_others_and_not_by_itself() {
    let mut c = Cluster::new(3, |_| ServerConfig::default().with_modern());
    let now = c.node(0).now;
    assert!(
        c.node(0)
            .router
            .broadcast_notice(now, Bytes::from_static(b"n1"))
    );
    c.settle();
    for i in [1, 2] {
        assert_eq!(
            c.notices(i),
            vec![("n0".into(), Bytes::from_static(b"n1"))],
            "node {i}: the notice once, naming its sender"
        );
    }
    assert_eq!(c.notices(0), vec![], "no echo to the sender");
    // A bus that echoes: the sender drops its own notice all the same.
    let now = c.node(0).now;
    c.node(0).router.handle_bus(
        now,
        BusMessage::Notice {
            from: "n0".into(),
            payload: Bytes::from_static(b"n1"),
        },
    );
    c.settle();
    assert_eq!(c.notices(0), vec![], "its own notice, echoed, is dropped");
    // The other way round, and in order.
    let now = c.node(2).now;
    for p in [&b"n2"[..], b"n3"] {
        c.node(2)
            .router
            .broadcast_notice(now, Bytes::copy_from_slice(p));
    }
    c.settle();
    let from_2 = |p: &'static [u8]| (Box::<str>::from("n2"), Bytes::from_static(p));
    assert_eq!(c.notices(0), vec![from_2(b"n2"), from_2(b"n3")]);
    assert_eq!(c.notices(1), vec![from_2(b"n2"), from_2(b"n3")]);
    assert_eq!(c.notices(2), vec![]);
}

#[test]
fn a_notice_sent_while_the_store_is_away_is_lost_not_retried() {
    let mut c = Cluster::new(2, |_| ServerConfig::default().with_modern());
    c.store.set_available(false);
    let now = c.node(0).now;
    c.node(0)
        .router
        .broadcast_notice(now, Bytes::from_static(b"lost"));
    c.settle();
    c.store.set_available(true);
    c.advance(Duration::from_secs(10));
    assert_eq!(c.notices(1), vec![], "at most once: nothing arrives later");
    let now = c.node(0).now;
    c.node(0)
        .router
        .broadcast_notice(now, Bytes::from_static(b"next"));
    c.settle();
    assert_eq!(
        c.notices(1),
        vec![("n0".into(), Bytes::from_static(b"next"))]
    );
}

#[test]
fn a_router_outside_a_cluster_broadcasts_nothing_and_ignores_notices() {
    let mut h = mcp_tests::server_harness::Harness::new(ServerConfig::default().with_modern());
    let now = h.now;
    assert!(!h.router.broadcast_notice(now, Bytes::from_static(b"x")));
    h.router.handle_bus(
        now,
        BusMessage::Notice {
            from: "elsewhere".into(),
            payload: Bytes::from_static(b"x"),
        },
    );
    h.pump();
    let outs = h.take_other();
    assert!(outs.is_empty(), "{outs:?}");
}

// ---------------------------------------------------------------------------------------
// End to end: servers on each runtime, raw HTTP to each instance.
// ---------------------------------------------------------------------------------------

const LIMIT: Duration = Duration::from_secs(10);
const V: &str = "2026-07-28";
const URI: &str = "x://1";
/// Fences: a notice sent after the ones under test, by each instance; once a listener has
/// both, anything the ones under test could still bring (a duplicate) has arrived.
const FENCE_B: &str = "x://fence-b";
const FENCE_C: &str = "x://fence-c";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// One instance's definition: a resource to subscribe to and a tool (so that the tools and
/// resources capabilities, with `listChanged` and `subscribe`, are announced).
fn definition(name: &str) -> Server {
    Server::new(name, "1")
        .resource(Resource::new(URI, "one"), |_, req| async move {
            Ok(vec![ResourceContents::text(req.uri, "1")])
        })
        .tool(Tool::new("touch"), |ctx, _| async move {
            let told = ctx.server().notify_resource_updated(URI);
            Ok(CallToolResult::text(format!("told {told}")))
        })
}

/// Instance `name`'s configuration, and the store it runs on.
type Instance = (ServerConfig, Arc<dyn ClusterBackend>);

fn config(name: &str, backend: Arc<dyn ClusterBackend>) -> Instance {
    let cluster = ClusterConfig::new(name).expect("name");
    (
        ServerConfig::default().with_modern().with_cluster(cluster),
        backend,
    )
}

/// A modern request on a fresh connection to `addr`.
async fn send(addr: SocketAddr, rpc: &str, id: i64, mut params: Value) -> http::Response<Incoming> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "cluster-listen", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let mut req = Request::builder()
        .method(Method::POST)
        .uri("/mcp")
        .header(header::HOST, addr.to_string())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .header("MCP-Protocol-Version", V);
    let raw = serde_json::value::to_raw_value(&params).expect("params");
    for (name, value) in mirror::mirror_headers(rpc, Some(&raw)) {
        req = req.header(name, value);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": rpc, "params": params});
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    mcp_tests::raw::exchange(addr, req).await
}

/// An open `subscriptions/listen` stream.
struct Listen {
    /// Its request id: the subscription id its notifications carry.
    id: i64,
    what: String,
    body: Incoming,
    buf: Vec<u8>,
    /// The notifications read after the acknowledgement.
    seen: Vec<Value>,
}

impl Listen {
    /// Opens one on `addr`, asking for `filter`; returns once acknowledged.
    async fn open(addr: SocketAddr, what: &str, id: i64, filter: Value) -> Listen {
        let resp = send(
            addr,
            "subscriptions/listen",
            id,
            json!({ "notifications": filter }),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK, "{what}");
        let mut l = Listen {
            id,
            what: what.to_owned(),
            body: resp.into_body(),
            buf: Vec::new(),
            seen: Vec::new(),
        };
        let ack = l.next().await;
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{what}: {ack}"
        );
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], id, "{what}: {ack}");
        l
    }

    /// The next `data:` event of the stream.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let data: String = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect::<Vec<_>>()
                    .join("\n");
                if !data.is_empty() {
                    return serde_json::from_str(&data).expect("event JSON");
                }
                continue;
            }
            let what = format!("an event on {}", self.what);
            let frame = bounded(&what, self.body.frame())
                .await
                .unwrap_or_else(|| panic!("{}: the stream ended", self.what))
                .expect("frame");
            if let Ok(data) = frame.into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }

    /// Reads notifications until `done` holds for what was read; every one must carry
    /// this stream's subscription id.
    async fn read_until(&mut self, done: impl Fn(&[Value]) -> bool) {
        while !done(&self.seen) {
            let n = self.next().await;
            assert_eq!(
                n["params"]["_meta"][SUBSCRIPTION_ID], self.id,
                "{}: a notification with another subscription id: {n}",
                self.what
            );
            self.seen.push(n);
        }
    }

    /// How many `resources/updated` for `uri` were read.
    fn updated(&self, uri: &str) -> usize {
        count_updated(&self.seen, uri)
    }

    /// How many `tools/list_changed` were read.
    fn tools_changed(&self) -> usize {
        count_tools_changed(&self.seen)
    }
}

fn count_updated(seen: &[Value], uri: &str) -> usize {
    seen.iter()
        .filter(|n| n["method"] == "notifications/resources/updated" && n["params"]["uri"] == uri)
        .count()
}

fn count_tools_changed(seen: &[Value]) -> usize {
    seen.iter()
        .filter(|n| n["method"] == "notifications/tools/list_changed")
        .count()
}

fn both_fences(seen: &[Value]) -> bool {
    count_updated(seen, FENCE_B) > 0 && count_updated(seen, FENCE_C) > 0
}

/// Waits until `server` has `n` listen streams registered (the acknowledgement is written
/// just before the stream is registered).
async fn listeners(server: &Server, n: usize) {
    bounded("listeners registered", async {
        while server.listener_count() != n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// The scenario on three instances `a`, `b`, `c` of one cluster (each its own `Server`):
/// listen streams on each, a resource updated and a tool added on B; every stream gets what
/// its filter asked for exactly once, with its own subscription id, and nothing else.
async fn changes_on_b_reach_every_listener_once(
    rt: Runtime,
    servers: [Server; 3],
    configs: [Instance; 3],
) {
    let [sa, sb, sc] = servers;
    let [ca, cb, cc] = configs;
    let serving: Vec<Serving> = vec![
        bounded("bind a", rt.serve_clustered(sa.clone(), ca.0, ca.1))
            .await
            .expect("a"),
        bounded("bind b", rt.serve_clustered(sb.clone(), cb.0, cb.1))
            .await
            .expect("b"),
        bounded("bind c", rt.serve_clustered(sc.clone(), cc.0, cc.1))
            .await
            .expect("c"),
    ];
    let [a, b, c] = [0, 1, 2].map(|i| serving[i].local_addr());
    let fences = json!([FENCE_B, FENCE_C]);
    let everything =
        json!({"toolsListChanged": true, "resourceSubscriptions": [URI, FENCE_B, FENCE_C]});
    let mut on_c = Listen::open(c, &format!("{rt}: c, everything"), 31, everything.clone()).await;
    let mut on_c_fences = Listen::open(
        c,
        &format!("{rt}: c, fences only"),
        32,
        json!({"resourceSubscriptions": fences}),
    )
    .await;
    let mut on_b = Listen::open(b, &format!("{rt}: b, everything"), 21, everything).await;
    let mut on_a_tools = Listen::open(
        a,
        &format!("{rt}: a, tools"),
        11,
        json!({"toolsListChanged": true, "resourceSubscriptions": fences}),
    )
    .await;
    listeners(&sa, 1).await;
    listeners(&sb, 1).await;
    listeners(&sc, 2).await;

    // The changes, on B: a resource updated (from a handler, over HTTP), a tool added.
    let resp = send(
        b,
        "tools/call",
        5,
        json!({"name": "touch", "arguments": {}}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    let answer = bounded("touch", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.contains("told 1"),
        "{rt}: B told its own listener: {answer}"
    );
    sb.add_tool(Tool::new("more"), |_, _| async {
        Ok(CallToolResult::text("more"))
    });
    // Through the bus (so every earlier publication of B's is delivered), then the fences.
    on_c.read_until(|s| count_updated(s, URI) > 0 && count_tools_changed(s) > 0)
        .await;
    assert_eq!(
        sb.notify_resource_updated(FENCE_B),
        1,
        "{rt}: B's own listener"
    );
    assert_eq!(
        sc.notify_resource_updated(FENCE_C),
        2,
        "{rt}: C's own listeners"
    );
    for l in [&mut on_c, &mut on_c_fences, &mut on_b, &mut on_a_tools] {
        l.read_until(both_fences).await;
    }
    for l in [&on_c, &on_b] {
        assert_eq!(l.updated(URI), 1, "{}: {:#?}", l.what, l.seen);
        assert_eq!(l.tools_changed(), 1, "{}: {:#?}", l.what, l.seen);
    }
    assert_eq!(
        on_a_tools.updated(URI),
        0,
        "{}: {:#?}",
        on_a_tools.what,
        on_a_tools.seen
    );
    assert_eq!(
        on_a_tools.tools_changed(),
        1,
        "{}: {:#?}",
        on_a_tools.what,
        on_a_tools.seen
    );
    assert_eq!(
        on_c_fences.seen.len(),
        2,
        "{}: {:#?}",
        on_c_fences.what,
        on_c_fences.seen
    );
    for l in [&on_c, &on_c_fences, &on_b, &on_a_tools] {
        assert_eq!(l.updated(FENCE_B), 1, "{}: {:#?}", l.what, l.seen);
        assert_eq!(l.updated(FENCE_C), 1, "{}: {:#?}", l.what, l.seen);
    }
    drop((on_c, on_c_fences, on_b, on_a_tools));
    for s in serving {
        bounded("shutdown", s.shutdown()).await;
    }
}

fn memory_cluster() -> ([Server; 3], [Instance; 3]) {
    let store = SharedMemoryCluster::new();
    let names = ["a", "b", "c"];
    let servers = names.map(definition);
    let configs = names.map(|n| config(n, Arc::new(store.clone())));
    (servers, configs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_listeners_on_every_instance_hear_a_change_on_b_once() {
    let (servers, configs) = memory_cluster();
    changes_on_b_reach_every_listener_once(Runtime::Tokio, servers, configs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smol_listeners_on_every_instance_hear_a_change_on_b_once() {
    let (servers, configs) = memory_cluster();
    changes_on_b_reach_every_listener_once(Runtime::Smol, servers, configs).await;
}

/// Three instances on Redis, each with a backend of its own.
fn redis_cluster(rt: Runtime, redis: &Redis) -> ([Server; 3], [Instance; 3]) {
    let names = ["a", "b", "c"];
    let servers = names.map(definition);
    let configs = names.map(|n| {
        let redis_config = mcp_redis::RedisConfig::default().with_prefix(format!("listen{rt}"));
        let backend = match rt {
            Runtime::Tokio => mcp_tokio::redis_backend(&redis.url(), redis_config),
            Runtime::Smol => mcp_smol::redis_backend(&redis.url(), redis_config),
        }
        .expect("backend");
        config(&format!("{n}{rt}"), backend)
    });
    (servers, configs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_listeners_hear_a_change_on_b_once_through_redis() {
    let redis = require_service!(Redis::start());
    let (servers, configs) = redis_cluster(Runtime::Tokio, &redis);
    changes_on_b_reach_every_listener_once(Runtime::Tokio, servers, configs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smol_listeners_hear_a_change_on_b_once_through_redis() {
    let redis = require_service!(Redis::start());
    let (servers, configs) = redis_cluster(Runtime::Smol, &redis);
    changes_on_b_reach_every_listener_once(Runtime::Smol, servers, configs).await;
}

/// One `Server` behind two instances (`a`, `b`) of a cluster, a third (`c`) with its own:
/// a change of the shared server reaches the listeners of `a` and `b` once (it tells them
/// itself) and `c` once (one broadcast); a change on `c` reaches `a` and `b` once each (the
/// shared server hears it through one of its routers only).
async fn a_server_bound_twice_tells_and_hears_each_change_once(rt: Runtime) {
    let store = SharedMemoryCluster::new();
    let shared = definition("shared");
    let own = definition("own");
    let backend = || -> Arc<dyn ClusterBackend> { Arc::new(store.clone()) };
    let serving: Vec<Serving> = vec![
        bounded("bind a", {
            let (config, backend) = config("a", backend());
            rt.serve_clustered(shared.clone(), config, backend)
        })
        .await
        .expect("a"),
        bounded("bind b", {
            let (config, backend) = config("b", backend());
            rt.serve_clustered(shared.clone(), config, backend)
        })
        .await
        .expect("b"),
        bounded("bind c", {
            let (config, backend) = config("c", backend());
            rt.serve_clustered(own.clone(), config, backend)
        })
        .await
        .expect("c"),
    ];
    let [a, b, c] = [0, 1, 2].map(|i| serving[i].local_addr());
    let filter = json!({"resourceSubscriptions": [URI, FENCE_B, FENCE_C]});
    let mut ls = Vec::new();
    for (addr, name, id) in [(a, "a", 1), (b, "b", 2), (c, "c", 3)] {
        ls.push(Listen::open(addr, &format!("{rt}: {name}"), id, filter.clone()).await);
    }
    listeners(&shared, 2).await;
    listeners(&own, 1).await;
    assert_eq!(
        shared.notify_resource_updated(URI),
        2,
        "{rt}: a and b, by the server"
    );
    ls[2].read_until(|s| count_updated(s, URI) > 0).await;
    assert_eq!(own.notify_resource_updated(URI), 1, "{rt}: c's own");
    ls[0].read_until(|s| count_updated(s, URI) > 1).await;
    ls[1].read_until(|s| count_updated(s, URI) > 1).await;
    shared.notify_resource_updated(FENCE_B);
    own.notify_resource_updated(FENCE_C);
    for l in &mut ls {
        l.read_until(both_fences).await;
        assert_eq!(
            l.updated(URI),
            2,
            "{}: one of each server: {:#?}",
            l.what,
            l.seen
        );
        assert_eq!(l.updated(FENCE_B), 1, "{}: {:#?}", l.what, l.seen);
        assert_eq!(l.updated(FENCE_C), 1, "{}: {:#?}", l.what, l.seen);
    }
    drop(ls);
    for s in serving {
        bounded("shutdown", s.shutdown()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokio_server_bound_to_two_instances_tells_and_hears_each_change_once() {
    a_server_bound_twice_tells_and_hears_each_change_once(Runtime::Tokio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smol_server_bound_to_two_instances_tells_and_hears_each_change_once() {
    a_server_bound_twice_tells_and_hears_each_change_once(Runtime::Smol).await;
}
