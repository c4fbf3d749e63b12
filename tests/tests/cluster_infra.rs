//! Smoke tests of the multi-instance test infrastructure (`mcp_tests::services`): a real
//! `redis-server` answers and is gone once its guard drops, and a real nginx balances two
//! loopback upstreams round robin (not sticky, even on one client connection), over HTTP/1.1
//! keep-alive, and streams an SSE-like chunked response without buffering it.
//!
//! Skipped (with a `skipped: ... not installed (apt-get install ...)` line) when
//! `redis-server` or `nginx` is missing, unless `CI` is set: then they fail.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use mcp_tests::require_service;
use mcp_tests::services::{Nginx, Redis, RespValue};
use tokio::sync::Notify;
use tokio::time::timeout;

/// The bound of every network wait of these tests.
const WAIT: Duration = Duration::from_secs(5);

/// Whether the process `pid` is gone (reaped; or its PID now belongs to another program).
fn gone(pid: u32, name: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|cmdline| !String::from_utf8_lossy(&cmdline).contains(name))
        .unwrap_or(true)
}

#[test]
fn redis_answers_and_its_guard_stops_it_by_pid() {
    let redis = require_service!(Redis::start());
    let mut conn = redis.connect().unwrap();
    assert_eq!(
        conn.command(&["PING"]).unwrap(),
        RespValue::Simple("PONG".into())
    );
    assert_eq!(
        conn.command(&["SET", "k", "v"]).unwrap(),
        RespValue::Simple("OK".into())
    );
    assert_eq!(
        conn.command(&["GET", "k"]).unwrap().as_text(),
        Some("v"),
        "{}",
        redis.log_tail()
    );
    // Started without persistence, and listening on loopback only.
    let config = |conn: &mut mcp_tests::services::Resp, key: &str| match conn
        .command(&["CONFIG", "GET", key])
        .unwrap()
    {
        RespValue::Array(Some(items)) => items[1].as_text().unwrap_or_default().to_string(),
        other => panic!("CONFIG GET {key}: {other:?}"),
    };
    assert_eq!(config(&mut conn, "appendonly"), "no");
    assert_eq!(config(&mut conn, "save"), "");
    assert_eq!(config(&mut conn, "bind"), "127.0.0.1");
    assert!(redis.url().starts_with("redis://127.0.0.1:"));

    let (pid, addr, dir) = (
        redis.pid().unwrap(),
        redis.addr(),
        redis.dir().to_path_buf(),
    );
    assert!(
        !gone(pid, "redis-server"),
        "redis-server {pid} is not running"
    );
    drop(redis);
    assert!(gone(pid, "redis-server"), "redis-server {pid} still runs");
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn a_persistent_redis_keeps_acknowledged_writes_across_a_sigkill_and_restart() {
    let mut redis = require_service!(Redis::start_persistent());
    let mut conn = redis.connect().unwrap();
    assert_eq!(
        conn.command(&["SET", "kept", "yes"]).unwrap(),
        RespValue::Simple("OK".into())
    );
    let first = redis.pid().unwrap();
    redis.kill();
    assert!(gone(first, "redis-server"));
    assert_eq!(redis.pid(), None);
    assert!(redis.connect().is_err(), "killed, yet it accepts");
    // The old connection sees the server go.
    assert!(conn.command(&["PING"]).is_err());

    redis.restart().unwrap();
    let second = redis.pid().unwrap();
    assert_ne!(first, second);
    let mut conn = redis.connect().unwrap();
    assert_eq!(
        conn.command(&["GET", "kept"]).unwrap().as_text(),
        Some("yes"),
        "{}",
        redis.log_tail()
    );
}

/// What the trivial upstreams share with the test.
#[derive(Default)]
struct Shared {
    /// `/sse` sends its second event when this is notified.
    release: Notify,
    /// `/sse` has sent its last event.
    ended: AtomicBool,
    /// How many bytes of `/flood` hyper has taken (to write them to nginx).
    flooded: AtomicUsize,
}

/// A trivial upstream: `/whoami` answers its name and what it saw of the request; `/sse`
/// sends one event, waits for `release`, sends another and ends (setting `ended`); `/flood`
/// streams [`FLOOD`] bytes as fast as it is read.
struct Upstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The size of a `/flood` response.
const FLOOD: usize = 64 << 20;

/// The body of `/flood`: 64 KiB chunks, counted as hyper takes them.
struct Flood {
    shared: Arc<Shared>,
    left: usize,
}

impl hyper::body::Body for Flood {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        static CHUNK: [u8; 64 << 10] = [b'x'; 64 << 10];
        let n = self.left.min(CHUNK.len());
        if n == 0 {
            return std::task::Poll::Ready(None);
        }
        self.left -= n;
        self.shared.flooded.fetch_add(n, Ordering::SeqCst);
        std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&CHUNK[..n])))))
    }
}

type Body = BoxBody<Bytes, Infallible>;

async fn upstream(name: &'static str, shared: Arc<Shared>) -> Upstream {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let shared = shared.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(name, req, shared)) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    Upstream {
        addr,
        accepted,
        task,
    }
}

fn answer(name: &'static str, req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let seen = |h: header::HeaderName| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_string()
    };
    let builder = Response::builder()
        .header("x-upstream", name)
        .header("x-seen-version", format!("{:?}", req.version()))
        .header("x-seen-host", seen(header::HOST))
        .header("x-seen-connection", seen(header::CONNECTION));
    match req.uri().path() {
        "/sse" => {
            let (tx, rx) = futures_channel::mpsc::unbounded::<Result<Frame<Bytes>, Infallible>>();
            tokio::spawn(async move {
                let _ = tx.unbounded_send(Ok(Frame::data(Bytes::from_static(
                    b"id: 1\ndata: first\n\n",
                ))));
                shared.release.notified().await;
                let _ = tx.unbounded_send(Ok(Frame::data(Bytes::from_static(
                    b"id: 2\ndata: last\n\n",
                ))));
                shared.ended.store(true, Ordering::SeqCst);
            });
            builder
                .header(header::CONTENT_TYPE, "text/event-stream")
                .header(header::CACHE_CONTROL, "no-cache")
                .body(StreamBody::new(rx).boxed())
                .unwrap()
        }
        "/flood" => builder
            .body(
                Flood {
                    shared,
                    left: FLOOD,
                }
                .boxed(),
            )
            .unwrap(),
        _ => builder
            .body(Full::new(Bytes::from_static(name.as_bytes())).boxed())
            .unwrap(),
    }
}

/// One HTTP/1.1 client connection to `addr`.
async fn client(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
    let stream = timeout(WAIT, tokio::net::TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

/// `GET path` with `Host: lb` on `sender`, once the connection is ready for it (the previous
/// response fully read).
async fn get(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    lb: SocketAddr,
    path: &str,
) -> Response<Incoming> {
    timeout(WAIT, sender.ready()).await.unwrap().unwrap();
    let req = Request::get(path)
        .header(header::HOST, lb.to_string())
        .body(Empty::new())
        .unwrap();
    timeout(WAIT, sender.send_request(req))
        .await
        .unwrap()
        .unwrap()
}

fn header_of(resp: &Response<Incoming>, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_balances_round_robin_not_sticky_over_http11_keep_alive() {
    let shared = Arc::new(Shared::default());
    let a = upstream("a", shared.clone()).await;
    let b = upstream("b", shared.clone()).await;
    let lb = require_service!(Nginx::round_robin(&[a.addr, b.addr]));
    assert_eq!(lb.upstreams(), &[a.addr, b.addr]);

    // Six requests on ONE client connection: they alternate between the upstreams.
    let mut sender = client(lb.addr()).await;
    let mut names = Vec::new();
    for _ in 0..6 {
        let resp = get(&mut sender, lb.addr(), "/whoami").await;
        assert_eq!(resp.status(), StatusCode::OK, "{}", lb.error_log_tail());
        // Upstream requests are HTTP/1.1, with the client's Host and no `Connection: close`.
        assert_eq!(header_of(&resp, "x-seen-version"), "HTTP/1.1");
        assert_eq!(header_of(&resp, "x-seen-host"), lb.addr().to_string());
        assert_eq!(header_of(&resp, "x-seen-connection"), "-");
        let name = header_of(&resp, "x-upstream");
        let body = timeout(WAIT, resp.into_body().collect())
            .await
            .unwrap()
            .unwrap()
            .to_bytes();
        assert_eq!(body, name.as_bytes());
        names.push(name);
    }
    assert!(
        names.windows(2).all(|w| w[0] != w[1]),
        "not round robin: {names:?}\n{}",
        lb.access_log()
    );
    assert!(names.contains(&"a".to_string()) && names.contains(&"b".to_string()));
    // A second client connection is not pinned either: its requests alternate too.
    let mut other = client(lb.addr()).await;
    let mut more = Vec::new();
    for _ in 0..2 {
        let resp = get(&mut other, lb.addr(), "/whoami").await;
        more.push(header_of(&resp, "x-upstream"));
        let _ = timeout(WAIT, resp.into_body().collect()).await.unwrap();
    }
    assert_ne!(more[0], more[1], "{more:?}");
    // Upstream keep-alive: eight sequential requests, one upstream connection each.
    assert_eq!(
        (
            a.accepted.load(Ordering::SeqCst),
            b.accepted.load(Ordering::SeqCst)
        ),
        (1, 1),
        "nginx did not reuse its upstream connections"
    );

    let (pid, addr, prefix) = (lb.pid(), lb.addr(), lb.prefix().to_path_buf());
    assert!(!gone(pid, "nginx"));
    drop((sender, other));
    drop(lb);
    assert!(gone(pid, "nginx"), "nginx {pid} still runs");
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    assert!(!prefix.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_streams_an_sse_response_unbuffered() {
    let shared = Arc::new(Shared::default());
    let a = upstream("a", shared.clone()).await;
    let b = upstream("b", shared.clone()).await;
    let lb = require_service!(Nginx::round_robin(&[a.addr, b.addr]));

    let mut sender = client(lb.addr()).await;
    let resp = get(&mut sender, lb.addr(), "/sse").await;
    assert_eq!(resp.status(), StatusCode::OK, "{}", lb.error_log_tail());
    assert_eq!(header_of(&resp, "content-type"), "text/event-stream");
    let mut body = resp.into_body();
    // The first event arrives while the upstream still holds the response open: it waits
    // for `release`, which only comes after this read. A buffering proxy times out here.
    let first = timeout(WAIT, body.frame())
        .await
        .expect("the first event did not come through before the response ended: buffered?")
        .unwrap()
        .unwrap()
        .into_data()
        .unwrap();
    assert_eq!(&first[..], b"id: 1\ndata: first\n\n");
    assert!(!shared.ended.load(Ordering::SeqCst));

    shared.release.notify_one();
    let rest = timeout(WAIT, body.collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    assert_eq!(&rest[..], b"id: 2\ndata: last\n\n");
    assert!(shared.ended.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_does_not_absorb_a_response_its_client_does_not_read() {
    // Unbuffered also means backpressure: a client that stops reading stops the upstream
    // (after the socket buffers and nginx's one `proxy_buffer_size` buffer). A buffering
    // proxy would take the whole 64 MiB into its temporary files at once.
    let shared = Arc::new(Shared::default());
    let a = upstream("a", shared.clone()).await;
    let lb = require_service!(Nginx::round_robin(&[a.addr]));
    let mut sender = client(lb.addr()).await;
    let resp = get(&mut sender, lb.addr(), "/flood").await;
    assert_eq!(resp.status(), StatusCode::OK, "{}", lb.error_log_tail());
    // Not a byte read: wait until the upstream is stuck (the count still for 300 ms).
    let (mut last, mut still) = (0, 0);
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = shared.flooded.load(Ordering::SeqCst);
        still = if now == last { still + 1 } else { 0 };
        last = now;
        if still == 3 {
            break;
        }
    }
    assert!(
        still == 3 && last < FLOOD / 2,
        "the upstream wrote {last} of {FLOOD} bytes to a client that reads nothing"
    );
    drop(resp);
}
