//! Liveness and readiness (`ServerConfig::with_health`): off by default; answered before
//! `Host` validation and authentication; readiness 503 with its reason while draining and
//! while the cluster store is unreachable, liveness 200 throughout. On a virtual clock, with
//! the in-memory cluster, and end to end on both adapters (a keep-alive connection opened
//! before the drain: the accept loop stops taking new ones).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use mcp_proto::server::{AuthDecision, Health, RequestHead, ServerConfig};
use mcp_service::schema::{CallToolResult, Tool};
use mcp_tests::cluster_harness::Cluster;
use mcp_tests::runtime::Runtime;
use mcp_tests::server_harness::{Harness, Req, init_body};
use serde_json::{Value, json};

fn health() -> Health {
    Health::new().liveness("/healthz").readiness("/readyz")
}

fn get(h: &mut Harness, path: &str) -> (StatusCode, Value) {
    let s = h.send(Req::new(Method::GET, path));
    let r = h.response(s).clone();
    assert_eq!(r.header("cache-control"), Some("no-store"), "{path}");
    (r.status(), r.json())
}

#[test]
fn health_paths_are_off_by_default() {
    let mut h = Harness::new(ServerConfig::default());
    for path in ["/healthz", "/readyz"] {
        let s = h.send(Req::new(Method::GET, path));
        assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
        assert!(!h.router.owns_path(path));
    }
}

#[test]
fn health_answers_ok_before_host_validation_and_authentication() {
    let deny = |_: &RequestHead<'_>| AuthDecision::unauthorized();
    let mut h = Harness::new(
        ServerConfig::default()
            .with_health(health())
            .with_authenticator(deny),
    );
    assert!(h.router.owns_path("/healthz") && h.router.owns_path("/readyz"));
    for path in ["/healthz", "/readyz"] {
        // A probe names the pod's address as Host, and carries no credentials.
        let s = h.send(Req::new(Method::GET, path).header("host", "10.1.2.3:8080"));
        let r = h.response(s).clone();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.json(), json!({"status": "ok"}));
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        let s = h.send(Req::new(Method::HEAD, path));
        assert_eq!(h.response(s).status(), StatusCode::OK);
        assert!(h.response(s).body.is_empty());
        let s = h.send(Req::new(Method::POST, path).body("{}"));
        assert_eq!(h.response(s).status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(h.response(s).header("allow"), Some("GET, HEAD"));
    }
    // Nothing else is exposed: the endpoint still checks Host, then credentials.
    let s = h.send(Req::post(&init_body(1, "2025-11-25")).header("host", "10.1.2.3:8080"));
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
    let s = h.send(Req::post(&init_body(1, "2025-11-25")));
    assert_eq!(h.response(s).status(), StatusCode::UNAUTHORIZED);
}

#[test]
fn a_health_path_never_shadows_the_endpoint() {
    let mut h = Harness::new(
        ServerConfig::default().with_health(Health::new().liveness("/mcp").readiness("/readyz")),
    );
    let s = h.send(Req::post(&init_body(1, "2025-11-25")));
    assert!(h.next_request().is_some());
    assert!(h.response(s).status.is_none());
}

#[test]
fn readiness_is_503_while_draining_and_liveness_stays_200() {
    let mut h = Harness::new(ServerConfig::default().with_health(health()));
    // A request in flight keeps the drain going.
    let s = h.send(Req::post(&init_body(1, "2025-11-25")));
    let (handle, _, _) = h.expect_request();
    assert_eq!(get(&mut h, "/readyz").0, StatusCode::OK);
    let now = h.now;
    h.router.begin_shutdown(now, Duration::from_secs(30));
    h.pump();
    assert!(!h.router.is_drained());
    let (status, body) = get(&mut h, "/readyz");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, json!({"status": "not ready", "reason": "draining"}));
    assert_eq!(
        get(&mut h, "/healthz"),
        (StatusCode::OK, json!({"status": "ok"}))
    );
    // The endpoint refuses new work as before.
    let other = h.send(Req::post(&init_body(2, "2025-11-25")));
    assert_eq!(h.response(other).status(), StatusCode::SERVICE_UNAVAILABLE);
    h.reply(
        handle,
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}"#,
    );
    assert_eq!(h.response(s).status(), StatusCode::OK);
}

#[test]
fn readiness_is_503_while_the_cluster_store_is_unreachable() {
    let mut c = Cluster::new(2, |_| ServerConfig::default().with_health(health()));
    for i in 0..2 {
        assert_eq!(get(c.node(i), "/readyz").0, StatusCode::OK);
    }
    c.store.set_available(false);
    c.settle();
    for i in 0..2 {
        let (status, body) = get(c.node(i), "/readyz");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            json!({"status": "not ready", "reason": "cluster store unreachable: the store is unavailable"})
        );
        assert_eq!(get(c.node(i), "/healthz").0, StatusCode::OK);
    }
    c.store.set_available(true);
    c.settle();
    for i in 0..2 {
        assert_eq!(
            get(c.node(i), "/readyz"),
            (StatusCode::OK, json!({"status": "ok"}))
        );
    }
}

/// One keep-alive HTTP/1.1 connection on a thread of its own (a current-thread tokio
/// runtime with hyper's client connection), usable from either runtime's test: each
/// [`get`](Probe::get) is sent on the same connection.
struct Probe {
    tx: tokio::sync::mpsc::UnboundedSender<(String, tokio::sync::oneshot::Sender<(u16, String)>)>,
}

impl Probe {
    fn connect(addr: SocketAddr) -> Probe {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(
            String,
            tokio::sync::oneshot::Sender<(u16, String)>,
        )>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                        .await
                        .expect("handshake");
                tokio::spawn(conn);
                while let Some((path, reply)) = rx.recv().await {
                    let req = http::Request::get(path)
                        .header("host", addr.to_string())
                        .body(Full::new(Bytes::new()))
                        .expect("a request");
                    let resp = sender.send_request(req).await.expect("a response");
                    let status = resp.status().as_u16();
                    let body = resp.into_body().collect().await.expect("a body").to_bytes();
                    let _ = reply.send((status, String::from_utf8_lossy(&body).into_owned()));
                }
            });
        });
        Probe { tx }
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.tx.send((path.to_owned(), tx)).expect("the probe runs");
        rx.await.expect("the probe answers")
    }
}

#[test]
fn readiness_flips_during_a_drain_on_both_adapters() {
    for rt in [Runtime::Tokio, Runtime::Smol] {
        rt.block_on(drain_flips_readiness(rt));
    }
}

async fn drain_flips_readiness(rt: Runtime) {
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let server = mcp_tests::everything::server().tool(
        Tool::new("hang").description("Never answers"),
        move |_, _| {
            let flag = flag.clone();
            async move {
                flag.store(true, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok(CallToolResult::text(""))
            }
        },
    );
    let config = ServerConfig::default().with_health(health());
    let serving = rt.serve(server, config).await.expect("serve");
    let probe = Probe::connect(serving.local_addr());
    assert_eq!(
        probe.get("/readyz").await,
        (200, r#"{"status":"ok"}"#.to_owned()),
        "{rt}"
    );
    let client = rt.connect(serving.url()).await.expect("connect");
    let call = client.call_tool("hang", json!({}));
    let probes = async {
        while !started.load(Ordering::SeqCst) {
            let _ = rt
                .timeout(Duration::from_millis(5), std::future::pending::<()>())
                .await;
        }
        serving.handle().shutdown_within(Duration::from_secs(30));
        let mut ready = probe.get("/readyz").await;
        // The driver takes the shutdown command on its own turn.
        for _ in 0..200 {
            if ready.0 != 200 {
                break;
            }
            let _ = rt
                .timeout(Duration::from_millis(5), std::future::pending::<()>())
                .await;
            ready = probe.get("/readyz").await;
        }
        assert_eq!(
            ready,
            (
                503,
                r#"{"status":"not ready","reason":"draining"}"#.to_owned()
            ),
            "{rt}"
        );
        assert_eq!(
            probe.get("/healthz").await,
            (200, r#"{"status":"ok"}"#.to_owned()),
            "{rt}"
        );
    };
    let raced = smol::future::or(
        async {
            let _ = call.await;
            panic!("the hanging call ended before the probes");
        },
        probes,
    );
    raced.await;
}

/// `/readyz` on `addr` over a fresh connection: status and body.
async fn ready(addr: SocketAddr) -> (u16, String) {
    let req = http::Request::get("/readyz")
        .header("host", addr.to_string())
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = mcp_tests::raw::exchange(addr, req).await;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Polls `/readyz` until `want(status, body)`, for at most 20 s; the last answer.
async fn ready_until(addr: SocketAddr, want: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = ready(addr).await;
        if want(status, &body) || std::time::Instant::now() >= deadline {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn redis_loss_flips_readiness(rt: Runtime) {
    let mut redis = mcp_tests::require_service!(mcp_tests::services::Redis::start_persistent());
    // Beats every 100 ms: an idle instance notices the loss within them.
    let config = mcp_redis::RedisConfig::default()
        .with_reconnect_backoff_max(Duration::from_millis(200))
        .with_liveness_ttl(Duration::from_millis(300));
    let backend = match rt {
        Runtime::Tokio => mcp_tokio::redis_backend(&redis.url(), config),
        Runtime::Smol => mcp_smol::redis_backend(&redis.url(), config),
    }
    .unwrap();
    let config = ServerConfig::default()
        .with_cluster(mcp_proto::server::ClusterConfig::new(format!("h{rt}")).unwrap())
        .with_health(health());
    let serving = rt
        .serve_clustered(mcp_tests::everything::server(), config, backend)
        .await
        .unwrap();
    let addr = serving.local_addr();
    let ok = (200, r#"{"status":"ok"}"#.to_owned());
    assert_eq!(ready_until(addr, |s, _| s == 200).await, ok, "{rt}");
    redis.kill();
    let (status, body) = ready_until(addr, |s, _| s == 503).await;
    assert_eq!(status, 503, "{rt}: {body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["status"], "not ready", "{rt}");
    let reason = body["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("cluster store unreachable: "),
        "{rt}: {reason}"
    );
    redis.restart().unwrap();
    assert_eq!(ready_until(addr, |s, _| s == 200).await, ok, "{rt}");
    serving.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_flips_while_redis_is_away_on_both_adapters() {
    for rt in [Runtime::Tokio, Runtime::Smol] {
        redis_loss_flips_readiness(rt).await;
    }
}
