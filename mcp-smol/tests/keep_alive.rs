//! The client's keep-alive pool (async-h1 has none), seen through a counting TCP proxy in
//! front of the smol users server: sequential requests reuse one connection; with no idle
//! connections allowed each request opens its own; a connection the server side closed
//! while idle is never reused (the next request opens a fresh one instead of failing).
//! Every await is bounded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::client::ClientConfig;
use mcp_service::client::Client as ServiceClient;
use mcp_smol::{Client, ClientOptions};
use serde_json::json;
use smol::future::FutureExt;
use smol::net::{Shutdown, TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(10);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    f.or(async {
        smol::Timer::after(LIMIT).await;
        panic!("timed out: {what}")
    })
    .await
}

/// A TCP proxy that counts the connections it accepts and can cut them all.
struct Proxy {
    url: String,
    accepted: Arc<AtomicUsize>,
    downstream: Arc<Mutex<Vec<TcpStream>>>,
    _task: smol::Task<()>,
}

impl Proxy {
    async fn start(upstream: std::net::SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let downstream = Arc::new(Mutex::new(Vec::new()));
        let (a, d) = (accepted.clone(), downstream.clone());
        let task = smol::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                d.lock().unwrap().push(client.clone());
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let (c2, s2) = (client.clone(), server.clone());
                smol::spawn(async move {
                    let _ = smol::io::copy(client, server).await;
                })
                .detach();
                smol::spawn(async move {
                    let _ = smol::io::copy(s2, c2.clone()).await;
                    let _ = c2.shutdown(Shutdown::Both);
                })
                .detach();
            }
        });
        Proxy {
            url,
            accepted,
            downstream,
            _task: task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Closes every connection the proxy accepted (as a server closing idle connections).
    fn cut_all(&self) {
        for tcp in self.downstream.lock().unwrap().drain(..) {
            let _ = tcp.shutdown(Shutdown::Both);
        }
    }
}

async fn client(url: &str, options: ClientOptions) -> Client {
    let client = Client::builder(url)
        .definition(ServiceClient::builder("keep-alive", "1"))
        .config(ClientConfig::new())
        .http(|_| options)
        .start()
        .expect("start");
    bounded("initialize", client.initialize())
        .await
        .expect("initialize");
    client
}

async fn get_user(client: &Client) {
    let r = bounded(
        "get_user",
        client.call_tool("get_user", json!({"user_id": "user_9"})),
    )
    .await
    .expect("get_user");
    assert_eq!(r.is_error, Some(true), "{r:?}");
}

#[test]
fn sequential_requests_reuse_one_connection() {
    smol::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let serving = mcp_smol::serve(listener, mcp_demo::users::server())
            .start()
            .expect("serve");
        let proxy = Proxy::start(serving.local_addr()).await;
        let client = client(&proxy.url, ClientOptions::default()).await;
        for _ in 0..10 {
            get_user(&client).await;
        }
        // initialize, notifications/initialized, 10 calls: all on the first connection.
        assert_eq!(proxy.accepted(), 1);
        bounded("close", client.close()).await;
        bounded("shutdown", serving.shutdown()).await;
    });
}

#[test]
fn without_idle_connections_each_request_connects() {
    smol::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let serving = mcp_smol::serve(listener, mcp_demo::users::server())
            .start()
            .expect("serve");
        let proxy = Proxy::start(serving.local_addr()).await;
        let client = client(
            &proxy.url,
            ClientOptions::default().with_max_idle_connections(0),
        )
        .await;
        for _ in 0..5 {
            get_user(&client).await;
        }
        // initialize, notifications/initialized, 5 calls.
        assert_eq!(proxy.accepted(), 7);
        bounded("close", client.close()).await;
        bounded("shutdown", serving.shutdown()).await;
    });
}

#[test]
fn an_idle_connection_closed_by_the_server_is_not_reused() {
    smol::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let serving = mcp_smol::serve(listener, mcp_demo::users::server())
            .start()
            .expect("serve");
        let proxy = Proxy::start(serving.local_addr()).await;
        let client = client(&proxy.url, ClientOptions::default()).await;
        get_user(&client).await;
        assert_eq!(proxy.accepted(), 1);
        proxy.cut_all();
        // Give the FIN time to arrive (bounded: the assertion below is what matters).
        smol::Timer::after(Duration::from_millis(100)).await;
        get_user(&client).await;
        get_user(&client).await;
        assert_eq!(proxy.accepted(), 2, "one fresh connection, then reused");
        bounded("close", client.close()).await;
        bounded("shutdown", serving.shutdown()).await;
    });
}

#[test]
fn the_pool_keeps_as_many_connections_as_requests_in_flight() {
    smol::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let serving = mcp_smol::serve(listener, mcp_demo::users::server())
            .start()
            .expect("serve");
        let proxy = Proxy::start(serving.local_addr()).await;
        let client = client(&proxy.url, ClientOptions::default()).await;
        const IN_FLIGHT: usize = 16;
        for _ in 0..5 {
            let calls: Vec<_> = (0..IN_FLIGHT)
                .map(|_| {
                    let service = client.client().clone();
                    smol::spawn(async move {
                        let r = service.call_tool("get_user", json!({"user_id": "user_9"}));
                        bounded("get_user", r).await.expect("get_user")
                    })
                })
                .collect();
            for call in calls {
                assert_eq!(call.await.is_error, Some(true));
            }
        }
        // A connection is dialed only when every one open is in use, so there are never more
        // than requests in flight; each freed one is kept, so the rounds after the first
        // reuse them. (A pool of 4 idle dials IN_FLIGHT - 4 more every round.)
        let accepted = proxy.accepted();
        assert!(
            accepted <= IN_FLIGHT,
            "{accepted} connections for {IN_FLIGHT} in flight"
        );
        assert!(accepted > 1, "the calls did run concurrently");
        bounded("close", client.close()).await;
        bounded("shutdown", serving.shutdown()).await;
    });
}
